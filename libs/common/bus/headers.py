"""NATS header names drasim reads and writes."""

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
NATS_MSG_ID = "Nats-Msg-Id"
EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
ACTOR = "Drasim-Actor"
STATUS_CODE = "Drasim-Status"
RESOURCE_VERSION = "Drasim-Resource-Version"
