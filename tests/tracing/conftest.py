"""Spans recorded in memory while a test runs its services in-process, and awaited as they
end (a span ends after the write the test may already have seen)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from drasim.common import tracing

T = TypeVar("T")

TIMEOUT = 20.0


class Spans(SpanExporter):
    """An exporter keeping every ended span; `wait_for` re-checks after each export."""

    def __init__(self) -> None:
        self.finished: list[ReadableSpan] = []
        self._changed = asyncio.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.finished.extend(spans)
        self._changed.set()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    async def wait_for(
        self, predicate: Callable[[list[ReadableSpan]], T], timeout: float = TIMEOUT
    ) -> T:
        """The first truthy value of `predicate(finished spans)`, now or after an export."""
        async with asyncio.timeout(timeout):
            while not (result := predicate(self.finished)):
                self._changed.clear()
                await self._changed.wait()
            return result

    def of_trace(self, trace_id: int) -> list[ReadableSpan]:
        return [s for s in self.finished if s.context.trace_id == trace_id]


@pytest.fixture
def spans() -> Iterator[Spans]:
    """Tracing on for this test (every in-process service shares it), off afterwards."""
    exporter = Spans()
    assert tracing.setup("drasim-test", exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.shutdown()
