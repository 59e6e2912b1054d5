"""NATS header names drasim reads and writes."""

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
NATS_MSG_ID = "Nats-Msg-Id"
EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
ACTOR = "Drasim-Actor"
STATUS_CODE = "Drasim-Status"
RESOURCE_VERSION = "Drasim-Resource-Version"
# On an event the outbox could not publish whole: the size in bytes of the message it
# stands for. Its payload holds the event's type and the object's identity only; watchers
# read the event itself back from the log (see the apistore's outbox).
STAND_IN = "Drasim-Stand-In"
