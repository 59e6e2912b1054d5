"""Scraping a service's `/metrics` over HTTP and reading samples the way Prometheus would
(with `prometheus_client.parser`), and awaiting in-process state without sleeping."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from drasim.common.informer import Informer

T = TypeVar("T")

TIMEOUT = 15.0


class Scrape:
    """One scrape: every sample, by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        families = list(text_string_to_metric_families(text))
        self.families = {family.name for family in families}  # with samples or without
        self.samples: list[Sample] = [sample for family in families for sample in family.samples]

    def all(self, name: str, **labels: str) -> list[Sample]:
        """The samples named `name` (`_total`, `_count`, `_bucket` included) whose labels
        include `labels`."""
        return [
            s
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float | None:
        """The one sample's value; None when there is none."""
        found = self.all(name, **labels)
        assert len(found) <= 1, f"{name}{labels} matches {len(found)} samples: {found}"
        return found[0].value if found else None

    def total(self, name: str, **labels: str) -> float:
        """The sum over every matching sample (e.g. all `attempts` series of a histogram)."""
        return sum(s.value for s in self.all(name, **labels))


async def scrape(url: str) -> Scrape:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/plain")
        return Scrape(await response.text())


class Changes:
    """Re-checks a condition after every change the given informers see: the way to await
    in-process state (a queue's lengths, an informer's cache) that moves with the cluster."""

    def __init__(self, *informers: Informer[Any]) -> None:
        self._changed = asyncio.Event()
        for informer in informers:
            informer.add_handlers(
                on_add=lambda _: self._changed.set(),
                on_update=lambda _old, _new: self._changed.set(),
                on_delete=lambda _: self._changed.set(),
            )

    async def until(self, predicate: Callable[[], T], timeout: float = TIMEOUT) -> T:
        async with asyncio.timeout(timeout):
            while not (result := predicate()):
                self._changed.clear()
                await self._changed.wait()
            return result
