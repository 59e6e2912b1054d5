"""Deployment → ReplicaSet → Pods through the apistore: naming, scaling, status, rollouts."""

from __future__ import annotations

import re

import msgspec
import pytest

from drasim.common import codec
from drasim.common.api import apps_v1, core_v1, defaults
from drasim.common.client import ApiClient
from drasim.common.quantity import parse_quantity
from drasim.controllers import ControllerManager
from drasim.controllers.deploymentutil import (
    POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION,
    SAFE_ALPHABET,
    pod_template_hash,
    resolve_fenceposts,
)
from tests.controllers.conftest import Changes, FakeKubelet

# The KEP's motivating example (keps/sig-scheduling/5004-dra-extended-resource), verbatim.
KEP_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: demo
spec:
  replicas: 1
  selector:
    matchLabels:
      app: demo
  template:
    metadata:
      labels:
        app: demo
    spec:
      containers:
      - name: demo
        image: nvidia/cuda:8.0-runtime
        command: ["/bin/sh", "-c"]
        args: ["nvidia-smi && tail -f /dev/null"]
        resources:
          limits:
            example.com/gpu: 1
"""

HASH = f"[{SAFE_ALPHABET}]+"
SUFFIX = f"[{SAFE_ALPHABET}]{{5}}"


def kep_deployment() -> apps_v1.Deployment:
    [document] = codec.load_yaml_documents(KEP_DEPLOYMENT)
    return codec.convert(document, apps_v1.Deployment)


def replica_sets_of(manager: ControllerManager, deployment: str) -> list[apps_v1.ReplicaSet]:
    return [
        rs
        for rs in manager.replica_sets.list()
        if rs.metadata.owner_references and rs.metadata.owner_references[0].name == deployment
    ]


def pods_of(manager: ControllerManager, rs: apps_v1.ReplicaSet) -> list[core_v1.Pod]:
    return [
        p
        for p in manager.pods.list()
        if p.metadata.owner_references and p.metadata.owner_references[0].uid == rs.metadata.uid
    ]


def active(pods: list[core_v1.Pod]) -> list[core_v1.Pod]:
    return [p for p in pods if p.metadata.deletion_timestamp is None]


async def scale(api: ApiClient, name: str, replicas: int) -> apps_v1.Deployment:
    return await api.patch(
        apps_v1.Deployment, name, {"spec": {"replicas": replicas}}, namespace="default"
    )


def deployment_status(manager: ControllerManager, name: str) -> apps_v1.DeploymentStatus:
    deployment = manager.deployments.get(name, "default")
    assert deployment is not None
    return deployment.status


def rolled_out(manager: ControllerManager, name: str, replicas: int) -> bool:
    deployment = manager.deployments.get(name, "default")
    status = deployment.status if deployment else None
    return bool(
        status
        and status.observed_generation == deployment.metadata.generation
        and status.replicas == status.updated_replicas == replicas
        and status.ready_replicas == status.available_replicas == replicas
    )


async def test_the_kep_example_applies_unchanged_with_kubernetes_naming(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    deployment = await api.create(kep_deployment())
    [rs] = await changes.until(lambda: replica_sets_of(manager, "demo"))
    template_hash = pod_template_hash(deployment.spec.template, None)
    assert rs.metadata.name == f"demo-{template_hash}"
    assert re.fullmatch(f"demo-{HASH}", rs.metadata.name)
    assert rs.metadata.labels == {"app": "demo", POD_TEMPLATE_HASH_LABEL: template_hash}
    assert rs.spec.selector.match_labels == {"app": "demo", POD_TEMPLATE_HASH_LABEL: template_hash}
    assert rs.metadata.annotations[REVISION_ANNOTATION] == "1"
    [owner] = rs.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("Deployment", "demo", deployment.metadata.uid)
    assert owner.controller and owner.block_owner_deletion

    [pod] = await changes.until(lambda: pods_of(manager, rs))
    assert re.fullmatch(f"{rs.metadata.name}-{SUFFIX}", pod.metadata.name)
    assert pod.metadata.generate_name == f"{rs.metadata.name}-"
    assert pod.metadata.labels == {"app": "demo", POD_TEMPLATE_HASH_LABEL: template_hash}
    [owner] = pod.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("ReplicaSet", rs.metadata.name, rs.metadata.uid)
    assert owner.controller
    [container] = pod.spec.containers
    assert container.resources.limits == {"example.com/gpu": parse_quantity(1)}
    assert container.args == ["nvidia-smi && tail -f /dev/null"]


async def test_scaling_0_6_2_converges_deleting_unscheduled_pods_first(
    api: ApiClient, manager: ControllerManager, changes: Changes, kubelet: FakeKubelet
) -> None:
    deployment = kep_deployment()
    deployment.spec.replicas = 0
    await api.create(deployment)
    [rs] = await changes.until(lambda: replica_sets_of(manager, "demo"))
    await changes.until(lambda: rolled_out(manager, "demo", 0))
    assert pods_of(manager, rs) == []

    await scale(api, "demo", 6)
    await changes.until(lambda: rolled_out(manager, "demo", 6))
    pods = pods_of(manager, rs)
    assert len(pods) == 6
    # Three pods land on a node; the other three stay unscheduled.
    bound = sorted(p.metadata.name for p in pods)[:3]
    for name in bound:
        await api.bind(manager.pods.get(name, "default"), "worker-1")
    await changes.until(lambda: all(manager.pods.get(n, "default").spec.node_name for n in bound))

    await scale(api, "demo", 2)
    await changes.until(lambda: rolled_out(manager, "demo", 2) and len(pods_of(manager, rs)) == 2)
    # Upstream deletes unscheduled pods first: the survivors are two of the bound ones.
    survivors = {p.metadata.name for p in pods_of(manager, rs)}
    assert survivors < set(bound)
    status = deployment_status(manager, "demo")
    assert (status.replicas, status.updated_replicas, status.unavailable_replicas) == (2, 2, 0)
    rs = manager.replica_sets.get(rs.metadata.name, "default")
    assert (rs.status.replicas, rs.status.ready_replicas, rs.status.available_replicas) == (2, 2, 2)
    assert rs.status.observed_generation == rs.metadata.generation


async def test_status_is_written_through_the_status_subresource(
    api: ApiClient, manager: ControllerManager, changes: Changes, kubelet: FakeKubelet
) -> None:
    deployment = kep_deployment()
    deployment.spec.replicas = 3
    await api.create(deployment)
    await changes.until(lambda: rolled_out(manager, "demo", 3))
    stored = await api.get(apps_v1.Deployment, "demo", namespace="default")
    status = stored.status
    assert status.observed_generation == stored.metadata.generation == 1
    assert (status.replicas, status.updated_replicas) == (3, 3)
    assert (status.ready_replicas, status.available_replicas, status.unavailable_replicas) == (
        3,
        3,
        0,
    )
    conditions = {c.type: (c.status, c.reason) for c in status.conditions}
    assert conditions == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    assert stored.metadata.annotations[REVISION_ANNOTATION] == "1"
    # The spec is the user's, as the API server defaulted it: the controller wrote none.
    written = kep_deployment()
    defaults.apply(written)
    assert stored.spec == msgspec.structs.replace(written.spec, replicas=3)


@pytest.mark.parametrize("strategy", ["RollingUpdate", "Recreate"])
async def test_a_template_change_rolls_out_a_new_replica_set(
    api: ApiClient,
    manager: ControllerManager,
    changes: Changes,
    kubelet: FakeKubelet,
    strategy: str,
) -> None:
    deployment = kep_deployment()
    deployment.spec.replicas = 2
    deployment.spec.strategy.type = strategy
    await api.create(deployment)
    await changes.until(lambda: rolled_out(manager, "demo", 2))
    [old] = replica_sets_of(manager, "demo")

    # Recreate: when the new set appears, the old one has no pods left at all.
    seen_at_creation: list[int] = []

    def on_new_replica_set(rs: apps_v1.ReplicaSet) -> None:
        if rs.metadata.name != old.metadata.name:
            seen_at_creation.append(len(pods_of(manager, old)))

    manager.replica_sets.add_handlers(on_add=on_new_replica_set)
    await api.patch(
        apps_v1.Deployment,
        "demo",
        {"spec": {"template": {"spec": {"containers": [{"name": "demo", "image": "cuda:12"}]}}}},
        namespace="default",
    )
    await changes.until(
        lambda: len(replica_sets_of(manager, "demo")) == 2 and rolled_out(manager, "demo", 2)
    )
    [new] = [rs for rs in replica_sets_of(manager, "demo") if rs.metadata.uid != old.metadata.uid]
    old = manager.replica_sets.get(old.metadata.name, "default")
    assert new.metadata.name != old.metadata.name
    assert (old.spec.replicas, new.spec.replicas) == (0, 2)
    await changes.until(lambda: not pods_of(manager, old))
    assert {p.spec.containers[0].image for p in pods_of(manager, new)} == {"cuda:12"}
    assert (
        old.metadata.annotations[REVISION_ANNOTATION],
        new.metadata.annotations[REVISION_ANNOTATION],
    ) == ("1", "2")
    await changes.until(
        lambda: (
            manager.deployments.get("demo", "default").metadata.annotations.get(REVISION_ANNOTATION)
            == "2"
        )
    )
    if strategy == "Recreate":
        assert seen_at_creation == [0]


async def test_old_replica_sets_beyond_the_history_limit_are_deleted(
    api: ApiClient, manager: ControllerManager, changes: Changes, kubelet: FakeKubelet
) -> None:
    deployment = kep_deployment()
    deployment.spec.revision_history_limit = 0
    await api.create(deployment)
    await changes.until(lambda: rolled_out(manager, "demo", 1))
    [old] = replica_sets_of(manager, "demo")
    await api.patch(
        apps_v1.Deployment,
        "demo",
        {"spec": {"template": {"metadata": {"labels": {"app": "demo", "rev": "2"}}}}},
        namespace="default",
    )
    [new] = await changes.until(
        lambda: (
            rolled_out(manager, "demo", 1)
            and manager.replica_sets.get(old.metadata.name, "default") is None
            and replica_sets_of(manager, "demo")
        )
    )
    assert new.metadata.annotations[REVISION_ANNOTATION] == "2"


def test_pod_template_hash_is_short_stable_and_safe() -> None:
    template = kep_deployment().spec.template
    first = pod_template_hash(template, None)
    assert first == pod_template_hash(kep_deployment().spec.template, None)
    assert re.fullmatch(HASH, first) and len(first) <= 10
    changed = codec.convert(
        {**codec.to_builtins(template), "metadata": {"labels": {"app": "other"}}},
        core_v1.PodTemplateSpec,
    )
    assert pod_template_hash(changed, None) != first
    assert pod_template_hash(template, 1) not in (first, pod_template_hash(template, 2))


@pytest.mark.parametrize(
    ("replicas", "rolling_update", "expected"),
    [
        (4, None, (1, 1)),
        (10, None, (3, 2)),
        (1, None, (1, 0)),
        (3, {"maxSurge": 0, "maxUnavailable": 0}, (0, 1)),
        (10, {"maxSurge": "50%", "maxUnavailable": 2}, (5, 2)),
    ],
    ids=["defaults-4", "defaults-10-rounding", "defaults-1", "both-zero", "explicit"],
)
def test_resolve_fenceposts(replicas: int, rolling_update: dict | None, expected: tuple) -> None:
    deployment = kep_deployment()
    deployment.spec.replicas = replicas
    if rolling_update is not None:
        deployment.spec.strategy = codec.convert(
            {"type": "RollingUpdate", "rollingUpdate": rolling_update}, apps_v1.DeploymentStrategy
        )
    assert resolve_fenceposts(deployment) == expected
