"""Which pods a scale-down removes first, in upstream's `ActivePodsWithRanks` order; and
the status counted from pod events, which must equal a count over all the set's pods."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from drasim.common import codec, labels
from drasim.common.api import apps_v1, core_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import podutil
from drasim.controllers.replicaset import ReplicaSetController, calculate_status, pods_to_delete


def pod(
    name: str,
    *,
    node: str = "",
    phase: str = "Running",
    ready_since: str | None = None,
    restarts: int = 0,
    created: str = "2026-07-01T12:00:00Z",
) -> core_v1.Pod:
    status: dict[str, Any] = {"phase": phase}
    if ready_since is not None:
        status["conditions"] = [
            {"type": "Ready", "status": "True", "lastTransitionTime": ready_since}
        ]
    if restarts:
        status["containerStatuses"] = [{"name": "c", "restartCount": restarts}]
    return codec.convert(
        {
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": status,
        },
        core_v1.Pod,
    )


READY = "2026-07-01T12:01:00Z"


@pytest.mark.parametrize(
    ("pods", "first"),
    [
        ([pod("bound", node="n1"), pod("unbound", phase="Pending")], "unbound"),
        ([pod("running", node="n1"), pod("pending", node="n1", phase="Pending")], "pending"),
        ([pod("ready", node="n1", ready_since=READY), pod("not-ready", node="n1")], "not-ready"),
        (
            [pod("alone", node="n1"), pod("crowded-a", node="n2"), pod("crowded-b", node="n2")],
            "crowded-a",
        ),
        (
            [
                pod("long-ready", node="n1", ready_since="2026-07-01T12:00:30Z"),
                pod("just-ready", node="n2", ready_since=READY),
            ],
            "just-ready",
        ),
        ([pod("calm", node="n1"), pod("restarting", node="n2", restarts=3)], "restarting"),
        (
            [pod("old", node="n1"), pod("new", node="n2", created="2026-07-01T13:00:00Z")],
            "new",
        ),
    ],
    ids=[
        "unscheduled-first",
        "pending-before-running",
        "not-ready-before-ready",
        "colocated-first",
        "ready-for-less-time-first",
        "more-restarts-first",
        "newer-first",
    ],
)
def test_scale_down_order(pods: list[core_v1.Pod], first: str) -> None:
    assert pods_to_delete(pods, 1)[0].metadata.name == first


# --- status counted from pod events ----------------------------------------------------


class FakeInformer:
    """The informer's contract without a server: the cache changes first, then the handlers
    run in the order they were added (the index before the controller's)."""

    def __init__(self) -> None:
        self.cache: dict[Key, Any] = {}
        self.resource_version = 0
        self._add: list[Callable[..., Any]] = []
        self._update: list[Callable[..., Any]] = []
        self._delete: list[Callable[..., Any]] = []

    def add_handlers(
        self,
        *,
        on_add: Callable[..., Any] | None = None,
        on_update: Callable[..., Any] | None = None,
        on_delete: Callable[..., Any] | None = None,
    ) -> None:
        for handlers, handler in (
            (self._add, on_add),
            (self._update, on_update),
            (self._delete, on_delete),
        ):
            if handler:
                handlers.append(handler)

    def get(self, name: str, namespace: str = "") -> Any:
        return self.cache.get((namespace, name))

    def put(self, obj: Any) -> None:
        self.resource_version += 1
        old = self.cache.get(key_of(obj))
        self.cache[key_of(obj)] = obj
        if old is None:
            for handler in self._add:
                handler(obj)
        else:
            for handler in self._update:
                handler(old, obj)

    def delete(self, key: Key) -> None:
        self.resource_version += 1
        obj = self.cache.pop(key)
        for handler in self._delete:
            handler(obj)


NOW = datetime(2026, 7, 1, 12, 1, tzinfo=UTC)
OWNERS = {"a": "uid-a", "b": "uid-b"}
TEMPLATES = [{}, {"app": "a"}, {"app": "a", "tier": "x"}, {"app": "b"}, {"hash": "h1"}]
TRANSITIONS = [None, "2026-07-01T12:00:00Z", "2026-07-01T12:00:45Z", "2026-07-01T12:00:59Z"]


def random_replica_set(rng: random.Random, name: str) -> apps_v1.ReplicaSet:
    return codec.convert(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": OWNERS[name], "generation": 1},
            "spec": {
                "replicas": 3,
                "minReadySeconds": rng.choice([0, 0, 10, 30]),
                "template": {"metadata": {"labels": rng.choice(TEMPLATES)}},
            },
        },
        apps_v1.ReplicaSet,
    )


def random_pod(rng: random.Random, name: str) -> core_v1.Pod:
    """A pod in any state: owned by either set, by a non-controller reference, by another
    kind or by nothing; any phase, maybe terminating; Ready or not, since any time, or with
    two Ready conditions; any labels."""
    owner = rng.choice(["a", "b", "a", "b", "not-controller", "other-kind", None])
    refs = []
    if owner in OWNERS:
        refs = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": owner,
                "uid": OWNERS[owner],
                "controller": True,
            }
        ]
    elif owner == "not-controller":
        refs = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": OWNERS["a"]}]
    elif owner == "other-kind":
        refs = [
            {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": OWNERS["a"], "controller": True}
        ]

    def ready(status: str) -> dict[str, Any]:
        condition = {"type": "Ready", "status": status}
        if (since := rng.choice(TRANSITIONS)) is not None:
            condition["lastTransitionTime"] = since
        return condition

    conditions = rng.choice(
        [
            [],
            [ready("True")],
            [ready("True")],
            [ready("False")],
            [{"type": "PodScheduled", "status": "True"}, ready("True")],
            [ready("False"), ready("True")],  # podutil.ready_condition reads the first
        ]
    )
    pod_labels = {
        k: rng.choice(v)
        for k, v in [("app", "ab"), ("tier", "xy"), ("hash", ["h1", "h2"])]
        if rng.random() < 0.7
    }
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"{name}-{rng.random()}",
        "labels": pod_labels,
        "ownerReferences": refs,
    }
    if rng.random() < 0.2:
        metadata["deletionTimestamp"] = "2026-07-01T12:00:30Z"
    return codec.convert(
        {
            "metadata": metadata,
            "spec": {"containers": [{"name": "c"}]},
            "status": {
                "phase": rng.choice(
                    ["Pending", "Running", "Running", "Succeeded", "Failed", "Unknown"]
                ),
                "conditions": conditions,
            },
        },
        core_v1.Pod,
    )


def status_by_walk(rs: apps_v1.ReplicaSet, pods: list[core_v1.Pod]) -> apps_v1.ReplicaSetStatus:
    """The status as a walk over all the set's pods makes it (the controller before it
    counted from pod events)."""
    owned = [
        p
        for p in pods
        if (ref := p.metadata.controller_ref())
        and (ref.kind, ref.api_version) == ("ReplicaSet", "apps/v1")
        and ref.uid == rs.metadata.uid
    ]
    active = [p for p in owned if podutil.is_pod_active(p)]
    template = labels.from_match_labels(rs.spec.template.metadata.labels)
    ready = [p for p in active if podutil.is_pod_ready(p)]
    min_ready = rs.spec.min_ready_seconds
    return apps_v1.ReplicaSetStatus(
        replicas=len(active),
        fully_labeled_replicas=sum(template.matches(p.metadata.labels) for p in active),
        ready_replicas=len(ready),
        available_replicas=sum(podutil.is_pod_available(p, min_ready, NOW) for p in ready),
        observed_generation=rs.metadata.generation,
        conditions=rs.status.conditions,
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_status_counted_from_events_equals_walk(seed: int) -> None:
    rng = random.Random(seed)
    pods, replica_sets = FakeInformer(), FakeInformer()
    controller = ReplicaSetController(
        cast(ApiClient, None),
        pods=cast(Informer[core_v1.Pod], pods),
        replica_sets=cast(Informer[apps_v1.ReplicaSet], replica_sets),
    )
    sets = {name: random_replica_set(rng, name) for name in OWNERS}
    names = [f"web-{i}" for i in range(10)]
    for _step in range(1500):
        present = [name for name in names if ("ns", name) in pods.cache]
        roll = rng.random()
        if roll < 0.1:  # the template's labels or minReadySeconds change
            name = rng.choice(list(OWNERS))
            sets[name] = random_replica_set(rng, name)
        elif roll < 0.25 and present:
            pods.delete(("ns", rng.choice(present)))
        else:  # a new pod, or a new version of one
            pods.put(random_pod(rng, rng.choice(names)))

        for rs in sets.values():
            assert calculate_status(rs, controller.count_pods(rs), NOW) == status_by_walk(
                rs, list(pods.cache.values())
            )
            # A scale-down ranks the active pods in the index's order, as before.
            keys = controller._pods_by_owner.keys(rs.metadata.uid)
            active = [p for k in keys if podutil.is_pod_active(p := pods.cache[k])]
            assert controller.active_pods(rs) == active
