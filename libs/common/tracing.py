"""Tracing: W3C trace context through NATS headers and the event log, OTLP export on demand.

A pod's life is one trace: the request that created it carries a `traceparent`, the
apistore's server span for it is stored with the event and published in the event's NATS
headers, and each service that reacts to the event continues the trace from there
(`span_from`, or `continued` to only make the event's context current). `ApiClient` sends
the current span's `traceparent` with every request.

Export happens only when configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, and the other standard `OTEL_*` variables: service
name, resource attributes, sampler, headers), or when a test hands `setup` an exporter.
Otherwise no SDK is installed: spans are the API's non-recording ones, which cost little
and still carry the parent's ids, so trace ids travel and
`drasim events --trace-id` works. Code that builds attributes or events for a span (per
node, per device) checks `span.is_recording()` first.

The SDK provider is this module's own, not OpenTelemetry's global one (which can be set
only once per process): `shutdown()` flushes and removes it, and a later `setup()` installs
a fresh one, so tests may each install an in-memory exporter.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

__all__ = [
    "SpanKind",
    "context_from",
    "continued",
    "current_traceparent",
    "enabled",
    "end",
    "fail",
    "inject",
    "mint",
    "setup",
    "shutdown",
    "span",
    "span_from",
    "start_client_span",
    "start_span",
    "traceparent_of",
    "tracer",
    "use",
]

TRACEPARENT = "traceparent"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_NOOP_TRACER = trace.NoOpTracer()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)

_provider: Any = None  # the SDK's TracerProvider while tracing is on
_tracers: dict[str, trace.Tracer] = {}

R = TypeVar("R")


# --- set-up ------------------------------------------------------------------------------


def setup(service_name: str, *, exporter: Any = None) -> bool:
    """Install the SDK for this process if export is configured (or an exporter is given,
    e.g. an in-memory one in tests). Returns whether spans are now recorded.

    `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep tracing off; the service
    name is `OTEL_SERVICE_NAME` if set, else `service_name`.
    """
    global _provider
    if _provider is not None:
        return True
    if exporter is None:
        if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return False
        if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
            return False
        if not any(os.environ.get(v) for v in _ENDPOINT_VARIABLES):
            return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or service_name
    provider = TracerProvider(
        resource=Resource.create({"service.name": name}), shutdown_on_exit=False
    )
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _provider = provider
    _tracers.clear()
    return True


def shutdown() -> None:
    """Flush what is buffered and remove the SDK (at service stop, and after each test);
    spans are non-recording again until the next `setup`."""
    global _provider
    provider, _provider = _provider, None
    _tracers.clear()
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    """Whether an SDK records spans in this process."""
    return _provider is not None


def tracer(name: str = "drasim") -> trace.Tracer:
    found = _tracers.get(name)
    if found is None:
        found = _provider.get_tracer(name) if _provider is not None else _NOOP_TRACER
        _tracers[name] = found
    return found


# --- traceparent -------------------------------------------------------------------------


class _RemoteSpan(NonRecordingSpan):
    """The parent a `traceparent` names, keeping the string: with no SDK, the spans of a
    trace are this object itself, and its `traceparent` is not formatted again."""

    def __init__(self, context: SpanContext, traceparent: str) -> None:
        super().__init__(context)
        self.traceparent = traceparent


def traceparent_of(s: Span) -> str:
    """The W3C `traceparent` naming span `s` ('' for an invalid span)."""
    if type(s) is _RemoteSpan:
        return s.traceparent
    ctx = s.get_span_context()
    if not ctx.is_valid:
        return ""
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


def current_traceparent() -> str:
    """The `traceparent` of the current span ('' outside any trace)."""
    return traceparent_of(trace.get_current_span())


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context to outgoing NATS headers."""
    traceparent = current_traceparent()
    if traceparent:
        headers[TRACEPARENT] = traceparent
    return headers


def mint() -> str:
    """A fresh, sampled `traceparent` for a request that came without one while no SDK
    runs here: its event still starts a trace the services continue."""
    ids = random.randbytes(24).hex()
    return f"00-{ids[:32]}-{ids[32:]}-01"


@functools.lru_cache(maxsize=4096)
def _remote_span(traceparent: str) -> _RemoteSpan | None:
    """The parent `traceparent` names (None if malformed); the services parse the same
    few traceparents again and again (a pod's, for each attempt and each sync)."""
    parent = _span_context(traceparent)
    return _RemoteSpan(parent, traceparent) if parent is not None else None


def _span_context(traceparent: str) -> SpanContext | None:
    parts = traceparent.split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or len(parts[2]) != 16 or parts[0] == "ff":
        return None
    try:
        trace_id, span_id = int(parts[1], 16), int(parts[2], 16)
        flags = int(parts[3][:2], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & 0xFF))


def context_from(traceparent: str | Mapping[str, str] | None) -> otel_context.Context:
    """The trace context a `traceparent` (or a headers mapping) names; an empty context
    (a new trace) for none or a malformed one."""
    if traceparent is not None and not isinstance(traceparent, str):
        traceparent = traceparent.get(TRACEPARENT)
    if not traceparent:
        return otel_context.Context()
    parent = _remote_span(traceparent)
    if parent is None:
        return otel_context.Context()
    return trace.set_span_in_context(parent, otel_context.Context())


# --- spans -------------------------------------------------------------------------------


def start_span(
    name: str,
    *,
    traceparent: str | Mapping[str, str] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    tracer_name: str = "drasim",
) -> Span:
    """A span (not made current) continuing `traceparent`, or a child of the current span
    when none is given. The caller ends it (`end`)."""
    context = context_from(traceparent) if traceparent is not None else None
    return tracer(tracer_name).start_span(name, context=context, kind=kind)


@contextlib.contextmanager
def use(s: Span, *, end_on_exit: bool = False) -> Iterator[Span]:
    """Make `s` the current span inside the block; an exception marks it failed."""
    with trace.use_span(s, end_on_exit=end_on_exit) as current:
        yield current


@contextlib.contextmanager
def span_from(
    name: str,
    traceparent: str | Mapping[str, str] | None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    tracer_name: str = "drasim",
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span]:
    """A span continuing the trace a message carried; errors mark it failed. Without a
    `traceparent` it is a child of the current span."""
    context = context_from(traceparent) if traceparent else None
    with tracer(tracer_name).start_as_current_span(
        name, context=context, kind=kind, attributes=attributes
    ) as s:
        yield s


@contextlib.contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    tracer_name: str = "drasim",
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span]:
    """A child of the current span."""
    with tracer(tracer_name).start_as_current_span(name, kind=kind, attributes=attributes) as s:
        yield s


@contextlib.contextmanager
def continued(traceparent: str) -> Iterator[None]:
    """Make the context `traceparent` names current without a span of its own: spans and
    writes inside are its children. No-op for ''."""
    parent = _remote_span(traceparent) if traceparent else None
    if parent is None:
        yield
        return
    token = otel_context.attach(trace.set_span_in_context(parent))
    try:
        yield
    finally:
        otel_context.detach(token)


def start_client_span(name_of: Callable[[R], str], arg: R) -> tuple[Span | None, str]:
    """For an outgoing request: a CLIENT child of the current span if that one records
    (named `name_of(arg)`, which is only called then), and the `traceparent` to send (''
    outside any trace). The caller ends the span (`end`)."""
    parent = trace.get_current_span()
    if not parent.is_recording():
        return None, traceparent_of(parent)
    s = tracer().start_span(name_of(arg), kind=SpanKind.CLIENT)
    return s, traceparent_of(s)


def fail(s: Span, message: str) -> None:
    """Mark a span as an error span (a retry or failure visible in Jaeger)."""
    s.set_status(Status(StatusCode.ERROR, message))


def end(s: Span | None, error: BaseException | str | None = None) -> None:
    """End `s` (if any), as failed when `error` is given."""
    if s is None:
        return
    if error is not None and s.is_recording():
        if isinstance(error, BaseException):
            s.record_exception(error)
            fail(s, f"{type(error).__name__}: {error}")
        else:
            fail(s, error)
    s.end()
