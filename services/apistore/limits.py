"""How large a request and a stored object may be, as kube-apiserver and etcd have it.

- A request body over `MAX_REQUEST_BODY_BYTES` (kube-apiserver's `MaxRequestBodyBytes`, 3 MiB,
  `staging/src/k8s.io/apiserver/pkg/server/config.go`) is refused before it is decoded:
  413 `RequestEntityTooLarge`, "Request entity too large: limit is 3145728"
  (`limitedReadBody` in `.../endpoints/handlers/rest.go`).
- An object whose stored form exceeds `MAX_OBJECT_BYTES` (etcd's `--max-request-bytes`
  default, 1.5 MiB) is refused when written, as etcd refuses the put: kube-apiserver passes
  etcd's "etcdserver: request is too large" on as an error it does not recognise, i.e.
  500 with an empty reason and etcd's text as the message (`ErrorToAPIStatus`, in
  `.../endpoints/handlers/responsewriters/status.go`). drasim measures the object's JSON,
  where etcd measures its protobuf (a little smaller) plus the key.

Every stored object also travels whole over NATS (the outbox's event, a GET's answer, an
informer's watch), so the bus must carry the largest object plus what a message holds
besides it (`BUS_OVERHEAD_BYTES`). `max_object_bytes` takes the bus's `max_payload` into
account: a NATS server configured below that lowers the accepted object size, as an etcd
run with a smaller `--max-request-bytes` does; the embedded NATS allows 8 MiB.
"""

from __future__ import annotations

import logging

from drasim.common import errors
from drasim.common.config import ConfigError

log = logging.getLogger(__name__)

MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
MAX_OBJECT_BYTES = 1536 * 1024
# What a NATS message carrying an object holds besides it: headers (trace context, actor,
# sequence), the subject, and the envelope of an event, a logged event or an answer.
BUS_OVERHEAD_BYTES = 64 * 1024
# Below this the bus could not carry what Kubernetes allows in annotations alone
# (`TotalAnnotationSizeLimitB`, 256 KiB): the apistore refuses to start.
MIN_OBJECT_BYTES = 256 * 1024
# etcd's words for a put over its limit, which kube-apiserver answers unchanged.
OBJECT_TOO_LARGE_MESSAGE = "etcdserver: request is too large"


class ObjectTooLarge(errors.InternalError):
    """The stored form of an object exceeds the limit: kube-apiserver's answer to etcd's
    refusal, a 500 whose reason is empty (`metav1.StatusReasonUnknown`)."""

    reason = ""


def request_entity_too_large(limit: int = MAX_REQUEST_BODY_BYTES) -> errors.RequestEntityTooLarge:
    return errors.RequestEntityTooLarge(f"Request entity too large: limit is {limit}")


def object_too_large() -> ObjectTooLarge:
    return ObjectTooLarge(OBJECT_TOO_LARGE_MESSAGE)


def max_object_bytes(max_payload: int, *, server: str = "") -> int:
    """The largest object the apistore accepts on a bus whose messages carry at most
    `max_payload` bytes: `MAX_OBJECT_BYTES`, or less (with a warning naming the limit) on a
    bus that could not carry it. Raises `ConfigError` for a bus too small to be useful.
    `server` (host:port) names the NATS server in both."""
    fits = max_payload - BUS_OVERHEAD_BYTES
    if fits >= MAX_OBJECT_BYTES:
        return MAX_OBJECT_BYTES
    server = f"the NATS server at {server}" if server else "the NATS server"
    needed = MAX_OBJECT_BYTES + BUS_OVERHEAD_BYTES
    if fits < MIN_OBJECT_BYTES:
        raise ConfigError(
            f"DRASIM_NATS_URL: {server} carries messages of at most {max_payload} bytes "
            f"(max_payload); the apistore needs at least {MIN_OBJECT_BYTES + BUS_OVERHEAD_BYTES}"
            f" ({needed} to accept objects of etcd's default size): raise max_payload in the "
            "server's configuration (e.g. max_payload: 8MB)"
        )
    log.warning(
        "%s carries messages of at most %d bytes (max_payload): accepting objects of at most "
        "%d bytes instead of %d (etcd's default); set max_payload to %d or more to accept them",
        server,
        max_payload,
        fits,
        MAX_OBJECT_BYTES,
        needed,
    )
    return fits
