"""The StatefulSet controller against a real apistore: ordered names and identities,
OrderedReady and Parallel, scaling both ways, and a rolling update from the top down."""

from __future__ import annotations

from drasim.common import codec
from drasim.common.api import apps_v1, core_v1, registry
from drasim.common.client import ApiClient
from drasim.controllers import ControllerManager
from drasim.controllers.statefulset import claim_name, new_pod, ordinal_of
from tests.controllers.conftest import Changes, FakeKubelet

STATEFUL_SET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 3
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: registry.k8s.io/pause:3.10
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"""


def make_stateful_set(**spec: object) -> apps_v1.StatefulSet:
    [document] = codec.load_yaml_documents(STATEFUL_SET)
    document["spec"].update(spec)
    return codec.convert(document, apps_v1.StatefulSet)


def live_pods(manager: ControllerManager) -> dict[str, core_v1.Pod]:
    return {
        p.metadata.name: p
        for p in manager.pods.cache.values()
        if p.metadata.labels.get("app") == "db" and p.metadata.deletion_timestamp is None
    }


def sts_status(manager: ControllerManager) -> apps_v1.StatefulSetStatus:
    sts = manager.stateful_sets.get("db", "default")
    return sts.status if sts is not None else apps_v1.StatefulSetStatus()


def test_a_pod_gets_its_identity_and_claims() -> None:
    sts = make_stateful_set()
    sts.metadata.uid = "uid-db"
    pod = new_pod(sts, 2, "db-abc")
    assert pod.metadata.name == "db-2" and ordinal_of(pod, "db") == 2
    assert (pod.spec.hostname, pod.spec.subdomain) == ("db-2", "db")
    labels = pod.metadata.labels
    assert labels[apps_v1.STATEFULSET_POD_NAME_LABEL] == "db-2"
    assert labels[apps_v1.POD_INDEX_LABEL] == "2"
    assert labels[apps_v1.CONTROLLER_REVISION_HASH_LABEL] == "db-abc"
    assert pod.spec.volumes == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-2"}}
    ]
    assert claim_name("data", sts, 2) == "data-db-2"
    assert ordinal_of(new_pod(sts, 0, "r"), "other") is None


async def test_ordered_ready_makes_one_at_a_time_and_scales_down_from_the_top(
    api: ApiClient, manager: ControllerManager, changes: Changes, kubelet: FakeKubelet
) -> None:
    await api.create(make_stateful_set())
    created_order: list[str] = []

    def all_three() -> bool:
        for name in live_pods(manager):
            if name not in created_order:
                created_order.append(name)
        return sts_status(manager).ready_replicas == 3

    await changes.until(all_three)
    assert created_order == ["db-0", "db-1", "db-2"]
    # Each pod's claim of the volume claim template was made for it.
    claims, _ = await api.list(
        registry.by_plural("persistentvolumeclaims").type, namespace="default"
    )
    assert sorted(c.metadata.name for c in claims) == ["data-db-0", "data-db-1", "data-db-2"]
    status = sts_status(manager)
    assert status.current_revision == status.update_revision
    assert (status.replicas, status.current_replicas, status.updated_replicas) == (3, 3, 3)
    await api.patch(apps_v1.StatefulSet, "db", {"spec": {"replicas": 1}}, namespace="default")
    await changes.until(lambda: set(live_pods(manager)) == {"db-0"})
    await changes.until(lambda: sts_status(manager).replicas == 1)


async def test_ordered_ready_waits_for_each_pod_and_parallel_does_not(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    """No kubelet: no pod ever becomes Ready."""
    await api.create(make_stateful_set())
    await changes.until(lambda: set(live_pods(manager)) == {"db-0"})
    parallel = make_stateful_set(podManagementPolicy="Parallel")
    parallel.metadata.name = "par"
    parallel.spec.selector.match_labels = {"app": "par"}
    parallel.spec.template.metadata.labels = {"app": "par"}
    await api.create(parallel)
    await changes.until(
        lambda: (
            {p.metadata.name for p in manager.pods.cache.values()} >= {"par-0", "par-1", "par-2"}
        )
    )
    assert set(live_pods(manager)) == {"db-0"}


async def test_a_rolling_update_replaces_pods_from_the_highest_ordinal(
    api: ApiClient, manager: ControllerManager, changes: Changes, kubelet: FakeKubelet
) -> None:
    await api.create(make_stateful_set())
    await changes.until(lambda: sts_status(manager).ready_replicas == 3)
    old = sts_status(manager).update_revision
    await api.patch(
        apps_v1.StatefulSet,
        "db",
        {"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}},
        namespace="default",
    )
    replaced: list[str] = []

    def rolled() -> bool:
        for name, pod in live_pods(manager).items():
            revision = pod.metadata.labels[apps_v1.CONTROLLER_REVISION_HASH_LABEL]
            if revision != old and name not in replaced:
                replaced.append(name)
        status = sts_status(manager)
        return (
            status.updated_replicas == 3
            and status.current_revision == status.update_revision != old
        )

    await changes.until(rolled)
    assert replaced == ["db-2", "db-1", "db-0"]
