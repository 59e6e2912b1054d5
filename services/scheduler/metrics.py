"""The scheduler's metrics, named and labelled as upstream's (`pkg/scheduler/metrics/metrics.go`).

- `scheduler_schedule_attempts_total{result,profile}`: one per scheduling attempt, counted
  where upstream counts it: `scheduled` once the binding cycle bound the pod,
  `unschedulable` or `error` in the failure handler (after either cycle);
- `scheduler_pending_pods{queue}`: the queue's lengths (`active`, `backoff`,
  `unschedulable`, `gated`), read when Prometheus scrapes, so queue operations cost nothing;
- `scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}`: as upstream,
  only 10 % of scheduling attempts time their plugins (`schedule_one` samples them into
  `CycleState.record_plugin_metrics`, and the framework runs them wrapped, see
  `framework.instrumentation`); the others run them as they are;
- `scheduler_pod_scheduling_sli_duration_seconds{attempts}`: from the pod's first entry into
  the queue to its binding, over all its attempts; `scheduler_pod_scheduling_attempts`: the
  attempts a bound pod needed;
- `dynamic_resource_allocation_resourceclaim_creates_total{status,admin_access,
  owner_api_group,owner_api_kind}`: the special claims DynamicResources created for
  extended resources (`drasim.common.resourceclaim_metrics`, shared with the controller
  manager as upstream's is).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from drasim.common import metrics, resourceclaim_metrics
from drasim.scheduler.queue import QueuedPodInfo

__all__ = ["PROFILE", "SchedulerMetrics"]

PROFILE = "default-scheduler"
QUEUES = ("active", "backoff", "unschedulable", "gated")

SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"


def attempts_label(attempts: int) -> str:
    """Upstream `getAttemptsLabel`: 15 attempts and more share one series."""
    return "15+" if attempts >= 15 else str(attempts)


class SchedulerMetrics:
    """The scheduler's registry. `pending_pods` returns the queue's lengths by queue name
    (`SchedulingQueue.pending_pods_by_queue`); `clock` is the queue's clock, which stamped
    `QueuedPodInfo.initial_attempt_timestamp`."""

    def __init__(
        self,
        *,
        pending_pods: Callable[[], Mapping[str, int]],
        clock: Callable[[], float] = time.monotonic,
        profile: str = PROFILE,
    ) -> None:
        self.registry = metrics.new_registry()
        self.profile = profile
        self._clock = clock
        self._pending_pods = pending_pods
        self.schedule_attempts = metrics.CounterVec(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ("result", "profile"),
        )
        self.plugin_execution_duration = metrics.HistogramVec(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ("plugin", "extension_point", "status"),
            buckets=metrics.exponential_buckets(0.00001, 1.5, 20),
        )
        self.pod_scheduling_sli_duration = metrics.HistogramVec(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the "
            "scheduling queue and might involve multiple scheduling attempts.",
            ("attempts",),
            buckets=metrics.exponential_buckets(0.01, 2, 20),
        )
        self.pod_scheduling_attempts = metrics.HistogramVec(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            (),
            buckets=metrics.exponential_buckets(1, 2, 5),
        )
        self.preemption_attempts = metrics.CounterVec(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now",
            (),
        )
        self.preemption_victims = metrics.HistogramVec(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            (),
            buckets=metrics.exponential_buckets(1, 2, 7),
        )
        self.resourceclaim_creates = resourceclaim_metrics.new_creates_counter()
        pending_doc = (
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number "
            "of pods in unschedulablePods that the scheduler attempted to schedule and failed; "
            "'gated' is the number of unschedulable pods that the scheduler never attempted to "
            "schedule because they are gated."
        )
        for collector in (
            self.schedule_attempts,
            self.plugin_execution_duration,
            self.pod_scheduling_sli_duration,
            self.pod_scheduling_attempts,
            self.preemption_attempts,
            self.preemption_victims,
            self.resourceclaim_creates,
            metrics.Callback(
                lambda: [
                    metrics.gauge(
                        "scheduler_pending_pods",
                        pending_doc,
                        ("queue",),
                        self._pending_samples(),
                    )
                ],
                [metrics.gauge("scheduler_pending_pods", pending_doc, ("queue",))],
            ),
        ):
            self.registry.register(collector)

    def _pending_samples(self) -> list[tuple[tuple[str], int]]:
        lengths = self._pending_pods()
        return [((queue,), lengths.get(queue, 0)) for queue in QUEUES]

    # -- hooks of the scheduling cycle ------------------------------------------------------

    def observe_plugin_duration(
        self, extension_point: str, plugin: str, status: str, seconds: float
    ) -> None:
        """The framework's `PluginDurationObserver`."""
        self.plugin_execution_duration.observe((plugin, extension_point, status), seconds)

    def pod_scheduled(self, pod_info: QueuedPodInfo) -> None:
        """The binding cycle bound the pod (upstream `PodScheduled`, then the SLI)."""
        self.schedule_attempts.inc((SCHEDULED, self.profile))
        self.pod_scheduling_attempts.observe((), pod_info.attempts)
        if pod_info.initial_attempt_timestamp is not None:
            self.pod_scheduling_sli_duration.observe(
                (attempts_label(pod_info.attempts),),
                self._clock() - pod_info.initial_attempt_timestamp,
            )

    def pod_failed(self, *, rejected: bool) -> None:
        """An attempt ended in the failure handler: the pod was rejected (`unschedulable`)
        or something went wrong (`error`)."""
        self.schedule_attempts.inc((UNSCHEDULABLE if rejected else ERROR, self.profile))

    def preempted(self, victims: int | None) -> None:
        """DefaultPreemption ran for a pod (upstream counts every PostFilter call), and
        evicted `victims` pods (None: it found no node)."""
        self.preemption_attempts.inc(())
        if victims is not None:
            self.preemption_victims.observe((), victims)
