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
# On every event: the resourceVersion of the event before it of the same resource, and of
# the same resource bound to the same node (0: none the stream still holds). A watcher of
# one resource, or of one resource on one node, that has seen events up to R misses nothing
# when the next event it gets names at most R; a larger one says events in between are
# gone (compacted or discarded from the stream while it lagged, or lost on a plain
# subscription) — see the apistore's `event_chain`.
PREV_OF_RESOURCE = "Drasim-Prev-Resource"
PREV_ON_NODE = "Drasim-Prev-Node"
