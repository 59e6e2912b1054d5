"""The metric SLIs of `drasim loadtest`: the services' `/metrics` scraped at the start and
the end of a phase, and each histogram's growth in between read as clusterloader2 reads
Prometheus (`histogram_quantile(q, sum(increase(<name>_bucket[window])) by (le, ...))`):

- `apiserver_request_duration_seconds` by verb, resource, subresource and scope, WATCH and
  the streaming subresources left out, as APIResponsivenessPrometheus does;
- `scheduler_pod_scheduling_sli_duration_seconds`, as PrometheusSchedulingMetrics;
- the kubelets' `dra_grpc_operations_duration_seconds` (NodePrepareResources and
  NodeUnprepareResources) and `dra_operations_duration_seconds` (PrepareResources,
  UnprepareResources), as the DRA test's GenericPrometheusQuery does.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from drasim.cli.loadtest import slis

__all__ = ["Histograms", "Snapshot", "api_calls", "scrape_all"]

API_REQUEST = "apiserver_request_duration_seconds"
SCHEDULING_SLI = "scheduler_pod_scheduling_sli_duration_seconds"
DRA_GRPC = "dra_grpc_operations_duration_seconds"
DRA_OPERATIONS = "dra_operations_duration_seconds"
_WANTED = (API_REQUEST, SCHEDULING_SLI, DRA_GRPC, DRA_OPERATIONS)
# What APIResponsivenessPrometheus leaves out: `verb!="WATCH", subresource!~"log|exec|..."`.
_STREAMING = {"log", "exec", "portforward", "attach", "proxy"}
SCRAPE_TIMEOUT_S = 30.0

Labels = tuple[tuple[str, str], ...]
# (histogram name, its labels but `le`) → upper bound → cumulative count
Buckets = dict[tuple[str, Labels], dict[float, float]]


@dataclass(frozen=True)
class Snapshot:
    """The wanted histograms' buckets summed over every scraped service."""

    buckets: Buckets

    @classmethod
    def parse(cls, texts: Iterable[str]) -> Snapshot:
        buckets: Buckets = {}
        for text in texts:
            for family in text_string_to_metric_families(text):
                if family.name not in _WANTED:
                    continue
                for sample in family.samples:
                    if not sample.name.endswith("_bucket"):
                        continue
                    labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
                    series = buckets.setdefault((family.name, labels), {})
                    le = float(sample.labels["le"])
                    series[le] = series.get(le, 0.0) + sample.value
        return cls(buckets)

    def since(self, earlier: Snapshot) -> Histograms:
        """Each histogram's increase from `earlier` to this one."""
        grown: Buckets = {}
        for key, series in self.buckets.items():
            before = earlier.buckets.get(key, {})
            grown[key] = {le: count - before.get(le, 0.0) for le, count in series.items()}
        return Histograms(grown)


@dataclass(frozen=True)
class Histograms:
    """Histograms' increases over a window."""

    buckets: Buckets

    def grouped(
        self, name: str, by: tuple[str, ...], where: Callable[[Mapping[str, str]], bool]
    ) -> dict[tuple[str, ...], list[tuple[float, float]]]:
        """`sum(increase(name_bucket{where})) by (le, *by)`: the buckets per group."""
        groups: dict[tuple[str, ...], dict[float, float]] = {}
        for (family, labels), series in self.buckets.items():
            label_map = dict(labels)
            if family != name or not where(label_map):
                continue
            group = groups.setdefault(tuple(label_map.get(k, "") for k in by), {})
            for le, count in series.items():
                group[le] = group.get(le, 0.0) + count
        return {k: sorted(v.items()) for k, v in groups.items()}

    def quantile(
        self, q: float, name: str, where: Callable[[Mapping[str, str]], bool] = lambda _: True
    ) -> float | None:
        """`histogram_quantile(q, ...)` over every series of `name` that `where` keeps."""
        merged = self.grouped(name, (), where).get(())
        return slis.histogram_quantile(q, merged) if merged else None

    def count(self, name: str, where: Callable[[Mapping[str, str]], bool]) -> int:
        merged = self.grouped(name, (), where).get((), [])
        return int(dict(merged).get(math.inf, 0.0))


def api_calls(histograms: Histograms) -> list[dict[str, object]]:
    """API call latency p99 per verb, resource, subresource and scope, with the SLO's
    threshold for it and whether it held; slowest first."""

    def measured(labels: Mapping[str, str]) -> bool:
        return labels.get("verb") != "WATCH" and labels.get("subresource") not in _STREAMING

    rows = []
    by = ("verb", "resource", "subresource", "scope")
    for (verb, resource, subresource, scope), buckets in histograms.grouped(
        API_REQUEST, by, measured
    ).items():
        calls = int(dict(buckets).get(math.inf, 0.0))
        p99 = slis.histogram_quantile(0.99, buckets)
        if not calls or p99 is None or not resource:
            continue
        threshold = slis.api_call_threshold(scope)
        rows.append({
            "verb": verb,
            "resource": resource,
            "subresource": subresource,
            "scope": scope,
            "calls": calls,
            "p99_s": round(p99, 4),
            "threshold_s": threshold,
            "pass": p99 <= threshold,
        })  # fmt: skip
    rows.sort(key=lambda row: -float(row["p99_s"]))  # type: ignore[arg-type]
    return rows


async def scrape_all(urls: Iterable[str]) -> Snapshot:
    """Scrape every URL at once; raises `aiohttp.ClientError` for one that fails."""
    timeout = aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def one(url: str) -> str:
            async with session.get(url) as response:
                response.raise_for_status()
                return await response.text()

        texts = await asyncio.gather(*(one(url) for url in urls))
    return Snapshot.parse(texts)
