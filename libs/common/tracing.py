"""Tracing: W3C trace context through NATS headers and the event log, OTLP export on demand.

A pod's life is one trace: the request that created it carries a `traceparent`, the
apistore stores it with the event and publishes it in the event's NATS headers, and each
service that reacts to the event continues the trace from there (`span_from`). Writes made
inside a span carry the span's `traceparent` again (`current_traceparent`).

Export happens only when configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, and the other standard `OTEL_*` variables); otherwise
no SDK is installed, spans are the API's non-recording ones and tracing costs next to
nothing, while trace ids still travel so `drasim events --trace-id` works.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_propagator = TraceContextTextMapPropagator()
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_installed = False


def setup(service_name: str, *, exporter: Any = None) -> bool:
    """Install the SDK for this process if export is configured (or an exporter is given,
    e.g. an in-memory one in tests). Returns whether spans are now recorded."""
    global _installed
    if _installed:
        return True
    if exporter is None and not any(os.environ.get(v) for v in _ENDPOINT_VARIABLES):
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME", service_name)
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _installed = True
    return True


def shutdown() -> None:
    """Flush what is buffered (at service stop)."""
    provider = trace.get_tracer_provider()
    if hasattr(provider, "shutdown"):
        provider.shutdown()


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


def current_traceparent() -> str:
    """The `traceparent` of the current span ('' outside any trace)."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent", "")


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context to outgoing NATS headers."""
    _propagator.inject(headers)
    return headers


def context_from(traceparent: str | Mapping[str, str] | None) -> otel_context.Context:
    """The trace context a `traceparent` (or a headers mapping) names."""
    if not traceparent:
        return otel_context.Context()
    carrier = {"traceparent": traceparent} if isinstance(traceparent, str) else dict(traceparent)
    return _propagator.extract(carrier)


@contextlib.contextmanager
def span_from(
    name: str,
    traceparent: str | Mapping[str, str] | None,
    *,
    tracer_name: str = "drasim",
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span]:
    """A span continuing the trace a message carried; errors mark it failed."""
    with tracer(tracer_name).start_as_current_span(
        name, context=context_from(traceparent), attributes=dict(attributes or {})
    ) as span:
        yield span


@contextlib.contextmanager
def span(
    name: str, *, tracer_name: str = "drasim", attributes: Mapping[str, Any] | None = None
) -> Iterator[Span]:
    """A child span of the current one."""
    with tracer(tracer_name).start_as_current_span(name, attributes=dict(attributes or {})) as s:
        yield s


def fail(s: Span, message: str) -> None:
    """Mark a span as an error span (a retry or failure visible in Jaeger)."""
    s.set_status(Status(StatusCode.ERROR, message))
