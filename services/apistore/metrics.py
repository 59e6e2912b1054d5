"""The apistore's metrics: requests as the kube-apiserver counts them, and the event log.

- `apiserver_request_total{verb,group,version,resource,subresource,scope,component,code}`
  and `apiserver_request_duration_seconds{verb,group,version,resource,subresource,scope,
  component}` (upstream `staging/src/k8s.io/apiserver/pkg/endpoints/metrics`), for both
  front doors: `component` is `nats` for the NATS API the services use and `http` for the
  Kubernetes HTTP API. Verbs are upstream's: GET, LIST, WATCH, POST (create, and binding),
  PUT, PATCH, APPLY, DELETE, DELETECOLLECTION. A request costs a clock read and two dict
  updates; the group and version are looked up from the resource at scrape time.
- The event log, read when Prometheus scrapes (one indexed query each, nothing on the write
  path): `drasim_apistore_event_log_last_sequence` (the newest resourceVersion),
  `drasim_apistore_event_log_events` (events kept), `drasim_apistore_outbox_published_sequence`
  (the last event JetStream acknowledged), and the publish lag:
  `drasim_apistore_outbox_lag_events` committed but not yet acknowledged, and
  `drasim_apistore_outbox_lag_seconds` since the oldest of them was committed; and
  `drasim_apistore_outbox_oversized_events_total`, events too large for NATS that the
  outbox published as stand-ins (an alarm: raise the NATS server's max_payload).
- The group-commit writer: `drasim_apistore_write_batches_total` and
  `drasim_apistore_write_requests_total` (requests per batch is their ratio).
"""

from __future__ import annotations

import functools
import logging
import time

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client.core import Metric

from drasim.apistore.core import ApiCore
from drasim.apistore.http import negotiation, options
from drasim.apistore.outbox import Outbox
from drasim.apistore.store import Store
from drasim.common import errors, metrics
from drasim.common.api import registry
from drasim.common.bus import messages

__all__ = ["ApiStoreMetrics", "RequestMetrics"]

log = logging.getLogger(__name__)

# Upstream's buckets of apiserver_request_duration_seconds.
REQUEST_DURATION_BUCKETS = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
)  # fmt: skip
NATS = "nats"
HTTP = "http"

# The verb of each NATS request, as the kube-apiserver names it.
_NATS_VERBS: dict[type, str] = {
    messages.Create: "POST",
    messages.Get: "GET",
    messages.List: "LIST",
    messages.Update: "PUT",
    messages.Patch: "PATCH",
    messages.Delete: "DELETE",
    messages.Bind: "POST",
    messages.EventLog: "LIST",
}
# How often a scrape counts the event log's rows.
EVENTS_COUNT_INTERVAL = 10.0
EVENT_LOG = "eventlog"  # the resource label of `drasim events` reads


@functools.lru_cache(maxsize=256)
def _group_version(resource: str) -> tuple[str, str]:
    try:
        info = registry.by_plural(resource)
    except errors.NotFound:
        return "", ""
    return info.group, info.version


def _expand_duration(key: metrics.Labels) -> metrics.Labels:
    verb, resource, subresource, scope, component = key
    return (verb, *_group_version(resource), resource, subresource, scope, component)


def _expand_total(key: metrics.Labels) -> metrics.Labels:
    return (*_expand_duration(key[:-1]), key[-1])


def _scope(verb: str, namespace: str, name: str) -> str:
    """Upstream `CleanScope`: a call on one object (named, or a create) is `resource`,
    whatever its namespace; the API call latency SLO holds those to 1 s, lists to 30 s."""
    if name or verb == "POST":
        return "resource"
    return "namespace" if namespace else "cluster"


class RequestMetrics:
    """`apiserver_request_total` and `apiserver_request_duration_seconds`."""

    LABELS = ("verb", "group", "version", "resource", "subresource", "scope", "component")

    def __init__(self) -> None:
        self.total = metrics.CounterVec(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, API resource, "
            "component (nats or http), and HTTP response code.",
            (*self.LABELS, "code"),
            expand=_expand_total,
        )
        self.duration = metrics.HistogramVec(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, API resource, "
            "subresource, scope and component (nats or http).",
            self.LABELS,
            buckets=REQUEST_DURATION_BUCKETS,
            expand=_expand_duration,
        )

    def collectors(self) -> list[metrics.CounterVec | metrics.HistogramVec]:
        return [self.total, self.duration]

    def observe(
        self,
        verb: str,
        resource: str,
        subresource: str,
        scope: str,
        component: str,
        code: int,
        seconds: float,
    ) -> None:
        key = (verb, resource, subresource, scope, component)
        self.duration.observe(key, seconds)
        self.total.inc((*key, str(code)))

    # -- the NATS API -------------------------------------------------------------------

    def observe_nats(
        self, req: messages.Request, started: float, error: BaseException | None = None
    ) -> None:
        """One NATS request answered: `started` is its `time.perf_counter()` on arrival."""
        seconds = time.perf_counter() - started
        kind = type(req)
        verb = _NATS_VERBS.get(kind, "")
        subresource = getattr(req, "subresource", "")
        if kind is messages.Bind:
            subresource = "binding"
        elif kind is messages.Patch and req.patch_type == "apply":  # type: ignore[union-attr]
            verb = "APPLY"
        if error is None:
            code = 201 if kind is messages.Create or kind is messages.Bind else 200
        else:
            code = error.code if isinstance(error, errors.ApiError) else 500
        resource = EVENT_LOG if kind is messages.EventLog else req.resource
        scope = _scope(verb, req.namespace, getattr(req, "name", ""))
        self.observe(verb, resource, subresource, scope, NATS, code, seconds)

    # -- the HTTP API -------------------------------------------------------------------

    @web.middleware
    async def http_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Outermost middleware of the HTTP API: sees the final status of every request."""
        started = time.perf_counter()
        code = 500
        try:
            response = await handler(request)
            code = response.status
            return response
        except web.HTTPException as exc:
            code = exc.status
            raise
        finally:
            seconds = time.perf_counter() - started
            try:
                labels = _http_labels(request)
            except Exception:  # measuring must never fail a request
                log.exception("labelling %s %s for metrics failed", request.method, request.path)
                labels = (request.method, "", "", "")
            self.observe(*labels, HTTP, code, seconds)


def _http_labels(request: web.Request) -> tuple[str, str, str, str]:
    """(verb, resource, subresource, scope) of an HTTP request, as upstream's RequestInfo."""
    method = request.method
    match = request.match_info
    if "path" not in match or "version" not in match:
        # Discovery, OpenAPI, /version, or no route at all: upstream labels a non-resource
        # request by its path; the route's pattern keeps that to a few series.
        route = match.route.resource
        path = route.canonical if route is not None else ""
        return method, "", path, ""
    try:
        target = options.target(request)
    except Exception:  # not a resource we serve (a 404): one series for all of them
        return method, "", "", ""
    name = target.name
    if method == "GET":
        verb = "GET" if name else ("WATCH" if options.flag(request.query, "watch") else "LIST")
    elif method == "DELETE":
        verb = "DELETE" if name else "DELETECOLLECTION"
    elif (
        method == "PATCH"
        and negotiation.PATCH_TYPES.get(negotiation.content_type(request)) == "apply"
    ):
        verb = "APPLY"
    else:
        verb = method
    return verb, target.info.plural, target.subresource, _scope(verb, target.namespace, name)


class ApiStoreMetrics:
    """The apistore's registry: requests, and the event log read from `store` and `outbox`
    at scrape time (`refresh`)."""

    def __init__(self, *, store: Store, outbox: Outbox, core: ApiCore) -> None:
        self.registry = metrics.new_registry()
        self.requests = RequestMetrics()
        self._store = store
        self._outbox = outbox
        self._core = core
        self.last_sequence = 0
        self.lag_seconds = 0.0
        # Rows of the log, counted at most every EVENTS_COUNT_INTERVAL (a count scans them).
        self.events_kept = 0
        self._counted_at = -EVENTS_COUNT_INTERVAL
        for collector in self.requests.collectors():
            self.registry.register(collector)
        self.registry.register(metrics.Callback(self._collect, self._families()))

    async def refresh(self) -> None:
        """Read the log's last sequence, and when the outbox is behind, when the oldest
        event not yet acknowledged was committed."""
        self.last_sequence = await self._store.max_seq()
        now = time.monotonic()
        if now - self._counted_at >= EVENTS_COUNT_INTERVAL:
            self.events_kept = await self._store.count_events()
            self._counted_at = now
        published = self._outbox.published
        self.lag_seconds = 0.0
        if self.last_sequence > published:
            self.lag_seconds = await self._outbox.unpublished_age()

    def _families(self, figures: dict[str, float] | None = None) -> list[Metric]:
        """The event-log families; without `figures`, empty (for `describe`)."""

        def samples(name: str) -> list[float]:
            return [figures[name]] if figures is not None else []

        return [
            metrics.gauge(
                "drasim_apistore_event_log_last_sequence",
                "Sequence (resourceVersion) of the newest event in the event log.",
                samples=samples("last"),
            ),
            metrics.gauge(
                "drasim_apistore_event_log_events",
                "Events kept in the event log: its last sequence until compaction folds "
                "older events away (counted at most every 10 s).",
                samples=samples("kept"),
            ),
            metrics.gauge(
                "drasim_apistore_outbox_published_sequence",
                "Sequence of the last event JetStream acknowledged to this apistore's outbox.",
                samples=samples("published"),
            ),
            metrics.gauge(
                "drasim_apistore_outbox_lag_events",
                "Events committed to the log but not yet acknowledged by JetStream.",
                samples=samples("lag_events"),
            ),
            metrics.gauge(
                "drasim_apistore_outbox_lag_seconds",
                "Seconds since the oldest event not yet acknowledged by JetStream was "
                "committed (0 when none is waiting).",
                samples=samples("lag_seconds"),
            ),
            metrics.counter(
                "drasim_apistore_outbox_oversized_events",
                "Events too large for NATS (its max_payload or the stream's max_msg_size) "
                "that the outbox published as stand-ins, for watchers to read back from the "
                "event log.",
                samples=samples("oversized"),
            ),
            metrics.counter(
                "drasim_apistore_write_batches",
                "Write batches (transactions) the group-commit writer committed.",
                samples=samples("batches"),
            ),
            metrics.counter(
                "drasim_apistore_write_requests",
                "Write requests answered by committed write batches.",
                samples=samples("requests"),
            ),
        ]

    def _collect(self) -> list[Metric]:
        outbox = self._outbox
        # Should a refresh fail (the database away), what this apistore committed itself.
        last = max(self.last_sequence, outbox.committed)
        published = outbox.published
        return self._families(
            {
                "last": last,
                "kept": self.events_kept,
                "published": published,
                "lag_events": max(last - published, 0),
                "lag_seconds": self.lag_seconds if last > published else 0.0,
                "oversized": outbox.oversized,
                "batches": self._core.stats["batches"],
                "requests": self._core.stats["requests"],
            }
        )
