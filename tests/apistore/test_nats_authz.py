"""RBAC over NATS: the scheduler (`system:kube-scheduler`), the controller manager's
informers (`system:kube-controller-manager`) and its controllers (their service accounts)
may do what upstream's bootstrap roles let them, and get upstream's 403 for the rest
(`drasim.apistore.nats_authz`)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from drasim.apistore import nats_authz, rbac
from drasim.common import codec, errors, nats_auth
from drasim.common.api import apps_v1, core_v1, rbac_v1, resource_v1
from drasim.common.bus import messages
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.builders import make_claim, make_node, make_pod, meta

SCHEDULER = nats_auth.KUBE_SCHEDULER
CONTROLLER_MANAGER = nats_auth.KUBE_CONTROLLER_MANAGER
REPLICASET_CONTROLLER = nats_auth.controller_identity(nats_auth.REPLICASET_CONTROLLER)
DISRUPTION_CONTROLLER = nats_auth.controller_identity(nats_auth.DISRUPTION_CONTROLLER)
CLAIM_CONTROLLER = nats_auth.controller_identity(nats_auth.RESOURCE_CLAIM_CONTROLLER)


async def _forbidden(call: Any) -> str:
    with pytest.raises(errors.Forbidden) as caught:
        await call
    return str(caught.value)


def _binding(name: str, role: str, user: str) -> rbac_v1.ClusterRoleBinding:
    return codec.convert(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": rbac_v1.GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": rbac_v1.GROUP, "kind": "User", "name": user}],
        },
        rbac_v1.ClusterRoleBinding,
    )


def _role(
    name: str, groups: list[str], resources: list[str], verbs: list[str]
) -> rbac_v1.ClusterRole:
    rule = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    return codec.convert({"metadata": {"name": name}, "rules": [rule]}, rbac_v1.ClusterRole)


def _deployment(name: str) -> apps_v1.Deployment:
    return codec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "pause"}]},
                },
            },
        },
        apps_v1.Deployment,
    )


def _event(name: str) -> core_v1.Event:
    return core_v1.Event(
        metadata=meta(name, "default"),
        involved_object=core_v1.ObjectReference(kind="Pod", namespace="default", name="p"),
        reason="Scheduled",
    )


async def test_the_scheduler_may_not_write_what_its_role_lacks(api: ApiClient, bus: Bus) -> None:
    await api.create(make_node("n1", cpu="4", pods="10"))
    scheduler = ApiClient(bus, actor=SCHEDULER)
    assert await _forbidden(scheduler.delete(core_v1.Node, "n1")) == (
        'nodes "n1" is forbidden: User "system:kube-scheduler" cannot delete resource "nodes" '
        'in API group "" at the cluster scope'
    )
    grant = _binding("mine", "cluster-admin", SCHEDULER)
    assert await _forbidden(scheduler.create(grant)) == (
        "clusterrolebindings.rbac.authorization.k8s.io is forbidden: User "
        '"system:kube-scheduler" cannot create resource "clusterrolebindings" in API group '
        '"rbac.authorization.k8s.io" at the cluster scope'
    )
    assert await _forbidden(scheduler.create(make_pod("p").container("c").obj())) == (
        'pods is forbidden: User "system:kube-scheduler" cannot create resource "pods" in API '
        'group "" in the namespace "default"'
    )
    # Nothing was written, nor read from the event log (which no role grants).
    assert (await api.get(core_v1.Node, "n1")).metadata.deletion_timestamp is None
    assert await _forbidden(scheduler.request(messages.EventLog())) == (
        'forbidden: User "system:kube-scheduler" cannot read the event log'
    )


async def test_the_scheduler_may_do_what_scheduling_takes_and_no_more(
    api: ApiClient, bus: Bus
) -> None:
    await api.create(make_node("n1", cpu="4", pods="10"))
    pod = await api.create(make_pod("p").container("c").obj())
    victim = await api.create(make_pod("victim").container("c").obj())
    scheduler = ApiClient(bus, actor=SCHEDULER)
    nodes, _ = await scheduler.list(core_v1.Node)
    assert [n.metadata.name for n in nodes] == ["n1"]
    await scheduler.list(resource_v1.ResourceSlice)
    await scheduler.list(resource_v1.DeviceClass)
    await scheduler.create(_event("scheduled"))
    # KEP-5004's special claim: made, given its finalizer and status, and deleted.
    claim = await scheduler.create(make_claim("special"))
    claim.metadata.finalizers = ["resource.kubernetes.io/delete-protection"]
    claim = await scheduler.update_status(await scheduler.update(claim))
    claim.metadata.finalizers = []
    await scheduler.update(claim)
    await scheduler.delete(resource_v1.ResourceClaim, "special", namespace="default")
    await scheduler.patch(
        core_v1.Pod, "p", {"status": {"nominatedNodeName": "n1"}}, namespace="default",
        subresource="status",
    )  # fmt: skip
    bound = await scheduler.bind(pod, "n1")
    assert bound.spec.node_name == "n1"
    await scheduler.delete(core_v1.Pod, "victim", namespace="default", uid=victim.metadata.uid)
    # And no more: the node it bound to is not its to change.
    node = await scheduler.get(core_v1.Node, "n1")
    node.metadata.labels["drasim.io/probe"] = "x"
    assert "cannot update resource" in await _forbidden(scheduler.update(node))


async def test_a_controller_acts_as_its_service_account(api: ApiClient, bus: Bus) -> None:
    pod = make_pod("p").container("c").obj()
    created = await ApiClient(bus, actor=REPLICASET_CONTROLLER).create(pod)
    assert created.metadata.name == "p"
    assert await _forbidden(ApiClient(bus, actor=DISRUPTION_CONTROLLER).create(pod)) == (
        'pods is forbidden: User "system:serviceaccount:kube-system:disruption-controller" '
        'cannot create resource "pods" in API group "" in the namespace "default"'
    )
    claims = ApiClient(bus, actor=CLAIM_CONTROLLER)
    await claims.create(make_claim("c"))
    assert "cannot delete resource" in await _forbidden(
        claims.delete(core_v1.Pod, "p", namespace="default")
    )
    # The shared informers list everything, and write nothing but Events.
    informers = ApiClient(bus, actor=CONTROLLER_MANAGER)
    roles, _ = await informers.list(rbac_v1.ClusterRole)
    assert "system:controller:replicaset-controller" in {r.metadata.name for r in roles}
    assert await _forbidden(informers.delete(core_v1.Pod, "p", namespace="default")) == (
        'pods "p" is forbidden: User "system:kube-controller-manager" cannot delete resource '
        '"pods" in API group "" in the namespace "default"'
    )


async def test_a_binding_counts_as_soon_as_it_is_written(api: ApiClient, bus: Bus) -> None:
    scheduler = ApiClient(bus, actor=SCHEDULER)
    assert "cannot create resource" in await _forbidden(scheduler.create(_deployment("a")))
    await api.create(_binding("scheduler-edits", "edit", SCHEDULER))
    await scheduler.create(_deployment("a"))
    await api.delete(rbac_v1.ClusterRoleBinding, "scheduler-edits")
    assert "cannot create resource" in await _forbidden(scheduler.create(_deployment("b")))


async def test_a_governed_identity_grants_nothing_it_does_not_hold(
    api: ApiClient, bus: Bus
) -> None:
    """Privilege escalation prevention applies to it as to an HTTP user: a role it may
    create must not grant more than it holds."""
    await api.create(_role("role-maker", [rbac_v1.GROUP], ["clusterroles"], ["create"]))
    await api.create(_binding("scheduler-makes-roles", "role-maker", SCHEDULER))
    scheduler = ApiClient(bus, actor=SCHEDULER)
    everything = _role("all", ["*"], ["*"], ["*"])
    message = await _forbidden(scheduler.create(everything))
    assert 'clusterroles.rbac.authorization.k8s.io "all" is forbidden' in message
    assert "attempting to grant RBAC permissions not currently held" in message


@pytest.mark.parametrize(
    ("req", "want"),
    [
        (
            messages.Get(resource="nodes", name="n"),
            rbac.Attributes("get", resource="nodes", name="n"),
        ),
        (
            messages.List(resource="pods"),
            rbac.Attributes("list", resource="pods"),
        ),
        (
            messages.List(resource="pods", namespace="a"),
            rbac.Attributes("list", namespace="a", resource="pods"),
        ),
        (
            messages.Create(
                resource="pods", object=msgspec.Raw(b'{"metadata": {"namespace": "a"}}')
            ),
            rbac.Attributes("create", namespace="a", resource="pods"),
        ),
        (
            messages.Create(resource="pods", object=msgspec.Raw(b"{}")),
            rbac.Attributes("create", namespace="default", resource="pods"),
        ),
        (
            messages.Update(
                resource="resourceclaims",
                namespace="a",
                name="c",
                object=msgspec.Raw(b"{}"),
                subresource="status",
            ),
            rbac.Attributes(
                "update",
                namespace="a",
                group="resource.k8s.io",
                resource="resourceclaims",
                subresource="status",
                name="c",
            ),
        ),
        (
            messages.Patch(
                resource="deployments",
                namespace="a",
                name="d",
                patch=msgspec.Raw(b"{}"),
                subresource="scale",
            ),
            rbac.Attributes(
                "patch",
                namespace="a",
                group="apps",
                resource="deployments",
                subresource="scale",
                name="d",
            ),
        ),
        (
            messages.Delete(resource="clusterroles", namespace="ignored", name="r"),
            rbac.Attributes(
                "delete", group="rbac.authorization.k8s.io", resource="clusterroles", name="r"
            ),
        ),
        (
            messages.Bind(resource="pods", namespace="a", name="p", node_name="n"),
            rbac.Attributes(
                "create", namespace="a", resource="pods", subresource="binding", name="p"
            ),
        ),
    ],  # fmt: skip
    ids=lambda v: type(v).__name__ if isinstance(v, messages.Request) else "",
)
def test_a_request_is_what_the_same_http_request_would_be(
    req: messages.Request, want: rbac.Attributes
) -> None:
    assert nats_authz.attributes(req) == want


def test_nodes_and_admins_are_not_rbac_s_to_judge() -> None:
    policy = rbac.Policy()  # no role at all: anything RBAC judged would be refused
    delete = messages.Delete(resource="nodes", name="n")
    assert nats_authz.authorize(policy, "system:node:n", delete) is None
    assert nats_authz.authorize(policy, "drasim-up", delete) is None
    with pytest.raises(errors.Forbidden):
        nats_authz.authorize(policy, SCHEDULER, delete)
