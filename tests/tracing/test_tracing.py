"""`drasim.common.tracing` itself: set-up and tear-down per test, traceparents in and out."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from drasim.common import tracing


def test_off_without_an_endpoint_and_on_with_an_exporter(monkeypatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert not tracing.setup("drasim-x")
    assert not tracing.enabled()
    with tracing.span("nothing") as s:
        assert not s.is_recording()

    exporter = InMemorySpanExporter()
    assert tracing.setup("drasim-x", exporter=exporter)
    with tracing.span("recorded") as s:
        assert s.is_recording()
    tracing.shutdown()
    assert not tracing.enabled()
    (recorded,) = exporter.get_finished_spans()
    assert recorded.resource.attributes["service.name"] == "drasim-x"

    # A later test installs its own exporter: nothing leaks from the first.
    second = InMemorySpanExporter()
    assert tracing.setup("drasim-y", exporter=second)
    try:
        with tracing.span("again"):
            pass
    finally:
        tracing.shutdown()
    assert [s.name for s in second.get_finished_spans()] == ["again"]
    assert len(exporter.get_finished_spans()) == 1


def test_sdk_disabled_wins_over_an_endpoint(monkeypatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not tracing.setup("drasim-x")


def test_a_trace_continues_with_and_without_an_sdk() -> None:
    parent = tracing.mint()
    _, trace_id, span_id, flags = parent.split("-")
    assert (len(trace_id), len(span_id), flags) == (32, 16, "01")
    # No SDK: the context is the parent's own, so writes carry the same traceparent.
    with tracing.continued(parent):
        assert tracing.current_traceparent() == parent
    with tracing.span_from("child", parent):
        assert tracing.current_traceparent() == parent
    assert tracing.current_traceparent() == ""

    exporter = InMemorySpanExporter()
    tracing.setup("drasim-x", exporter=exporter)
    try:
        with tracing.span_from("child", {"traceparent": parent}) as s:
            child = tracing.current_traceparent()
            assert child == tracing.traceparent_of(s)
        with tracing.span_from("root", "00-not-a-traceparent-01"):
            pass
    finally:
        tracing.shutdown()
    assert child.split("-")[1] == trace_id and child.split("-")[2] != span_id
    continued, root = exporter.get_finished_spans()
    assert f"{continued.parent.span_id:016x}" == span_id
    assert root.parent is None  # a malformed traceparent starts a new trace
