"""The embedded NATS as `drasim up` runs it: every identity authenticated, each limited to
its own subjects, and a request's actor the identity NATS vouches for, never a header."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import msgspec
import nats
import nats.errors
import pytest

from drasim.apistore.server import ApiServer
from drasim.common import codec, errors, nats_auth
from drasim.common.api import core_v1, meta_v1
from drasim.common.bus import consumer, headers, messages, subjects
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.embedded import EmbeddedNats
from drasim.common.watch import watch_raw
from drasim.kubelet import control
from drasim.kubelet.watch import watch_nodes_raw

if TYPE_CHECKING:
    from tests.conftest import Fresh


@pytest.fixture(scope="module")
def cluster_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    """`drasim up`'s identities, for any prefix: each test has its own."""
    data_dir = tmp_path_factory.mktemp("nats-auth")
    users = nats_auth.cluster_users("*", [["node-a"], ["node-b"]])
    with EmbeddedNats(data_dir, users=users) as server:
        yield server


@pytest.fixture
def prefix(fresh: Fresh) -> str:
    return fresh.prefix


@pytest.fixture
async def apistore(cluster_nats: EmbeddedNats, fresh: Fresh) -> AsyncIterator[ApiServer]:
    server = await ApiServer.start(
        nats_url=cluster_nats.url,
        nats_credentials=cluster_nats.credentials("apistore"),
        database_url=fresh.database_url,
        prefix=fresh.prefix,
    )
    yield server
    await server.stop()


@contextlib.asynccontextmanager
async def _bus(server: EmbeddedNats, user: str, prefix: str) -> AsyncIterator[Bus]:
    bus = await Bus.connect(server.url, prefix=prefix, credentials=server.credentials(user))
    try:
        yield bus
    finally:
        await bus.close()


@contextlib.asynccontextmanager
async def _raw(server: EmbeddedNats, user: str) -> AsyncIterator[tuple[nats.NATS, list[str]]]:
    """A plain nats-py connection as `user`, with the errors the server sends it."""
    seen: list[str] = []

    async def on_error(exc: Exception) -> None:
        seen.append(str(exc))

    name, password = (
        nats_auth.credentials_path(server.data_dir, user).read_text().strip().split(":")
    )
    nc = await nats.connect(
        server.url,
        user=name,
        password=password,
        inbox_prefix=f"_INBOX_{name}",
        error_cb=on_error,
        allow_reconnect=False,
    )
    try:
        yield nc, seen
    finally:
        await nc.close()


async def _violation(seen: list[str], nc: nats.NATS) -> str:
    """The permissions violation the server reported (it answers asynchronously)."""
    for _ in range(100):
        await nc.flush()
        if any("permissions violation" in e.lower() for e in seen):
            return next(e for e in seen if "permissions violation" in e.lower())
        await asyncio.sleep(0.02)
    raise AssertionError(f"no permissions violation reported: {seen}")


def _pod(name: str) -> core_v1.Pod:
    return core_v1.Pod(
        metadata=meta_v1.ObjectMeta(name=name, namespace="default"),
        spec=core_v1.PodSpec(containers=[core_v1.Container(name="c", image="pause")]),
    )


def _event(name: str) -> core_v1.Event:
    return core_v1.Event(
        metadata=meta_v1.ObjectMeta(name=name, namespace="default"),
        involved_object=core_v1.ObjectReference(kind="Pod", namespace="default", name="p"),
        reason="Scheduled",
        message="probe",
    )


async def _actors(bus: Bus, resource: str) -> list[str]:
    api = ApiClient(bus, actor="admin")
    body = await api.request(messages.EventLog(resource=resource))
    result = msgspec.json.decode(body, type=messages.EventLogResult)
    return [event.actor for event in result.events]


async def test_clients_without_a_password_are_refused(cluster_nats: EmbeddedNats) -> None:
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(cluster_nats.url, allow_reconnect=False, max_reconnect_attempts=0)
    path = nats_auth.credentials_path(cluster_nats.data_dir, "scheduler")
    assert path.stat().st_mode & 0o077 == 0
    assert (cluster_nats.data_dir / "nats.conf").stat().st_mode & 0o077 == 0


async def test_the_actor_is_the_identity_not_a_header(
    apistore: ApiServer, cluster_nats: EmbeddedNats, prefix: str
) -> None:
    async with _bus(cluster_nats, "scheduler", prefix) as bus:
        # A header saying otherwise is ignored: the subject names the actor.
        msg = await bus.request(
            subjects.api(prefix, nats_auth.KUBE_SCHEDULER),
            messages.encoder.encode(
                messages.Create(
                    resource="events",
                    namespace="default",
                    object=msgspec.Raw(codec.encode(_event("a"))),
                )
            ),
            timeout=5,
            headers={headers.ACTOR: "kubelet"},
        )
        assert headers.STATUS_CODE not in (msg.headers or {}), msg.data  # created
        # Acting as someone else is not this user's to do: the server drops the request.
        posing = ApiClient(bus, actor="kubelet", timeout=0.5)
        with pytest.raises(errors.Timeout):
            await posing.create(_event("b"))
    async with _bus(cluster_nats, "admin", prefix) as admin:
        assert await _actors(admin, "events") == [nats_auth.KUBE_SCHEDULER]
        # An admin may act as anyone (impersonation).
        await ApiClient(admin, actor="kubelet").create(_event("c"))
        assert await _actors(admin, "events") == [nats_auth.KUBE_SCHEDULER, "kubelet"]


async def test_the_scheduler_and_the_controllers_are_held_to_their_roles(
    apistore: ApiServer, cluster_nats: EmbeddedNats, prefix: str
) -> None:
    async with _bus(cluster_nats, "admin", prefix) as admin:
        await ApiClient(admin, actor="admin").create(_pod("p"))
    async with _bus(cluster_nats, "scheduler", prefix) as bus:
        scheduler = ApiClient(bus, actor=nats_auth.KUBE_SCHEDULER)
        pods, _ = await scheduler.list(core_v1.Pod)
        assert [p.metadata.name for p in pods] == ["p"]
        with pytest.raises(errors.Forbidden) as caught:
            await scheduler.create(_pod("q"))
        assert str(caught.value) == (
            'pods is forbidden: User "system:kube-scheduler" cannot create resource "pods" '
            'in API group "" in the namespace "default"'
        )
    async with _bus(cluster_nats, "controllers", prefix) as bus:
        deployments = ApiClient(
            bus, actor=nats_auth.controller_identity(nats_auth.DEPLOYMENT_CONTROLLER)
        )
        with pytest.raises(errors.Forbidden, match='cannot delete resource "pods"'):
            await deployments.delete(core_v1.Pod, "p", namespace="default")
        replica_sets = ApiClient(
            bus, actor=nats_auth.controller_identity(nats_auth.REPLICASET_CONTROLLER)
        )
        await replica_sets.delete(core_v1.Pod, "p", namespace="default")


async def test_only_the_apistore_publishes_events_and_serves_the_api(
    apistore: ApiServer, cluster_nats: EmbeddedNats, prefix: str
) -> None:
    async with _raw(cluster_nats, "scheduler") as (nc, seen):
        await nc.publish(subjects.event(prefix, "pods", namespace="default", name="x"), b"{}")
        assert "publish" in await _violation(seen, nc)
    async with _raw(cluster_nats, "controllers") as (nc, seen):
        await nc.subscribe(subjects.api_all(prefix), queue=subjects.api_queue_group())
        assert "subscription" in await _violation(seen, nc)
    async with _raw(cluster_nats, "kubelet-0") as (nc, seen):
        await nc.subscribe("_INBOX_scheduler.>")  # someone else's replies
        assert "subscription" in await _violation(seen, nc)
    async with _bus(cluster_nats, "admin", prefix) as admin:
        # Nothing was forged into the stream: it holds the apistore's events alone.
        body = await ApiClient(admin, actor="admin").request(messages.EventLog())
        logged = msgspec.json.decode(body, type=messages.EventLogResult).last_seq
        state = (await admin.js.stream_info(subjects.stream(prefix))).state
        assert state.messages == state.last_seq == logged


async def test_a_kubelet_acts_as_its_own_nodes_only(
    apistore: ApiServer, cluster_nats: EmbeddedNats, prefix: str
) -> None:
    async with _bus(cluster_nats, "kubelet-0", prefix) as bus:
        with pytest.raises(errors.NotFound):  # its own Node is its to read
            await ApiClient(bus, actor="system:node:node-a").get(core_v1.Node, "node-a")
        posing = ApiClient(bus, actor="system:node:node-b", timeout=0.5)
        with pytest.raises(errors.Timeout):  # the server drops what it may not publish
            await posing.get(core_v1.Node, "node-b")


async def test_a_kubelet_listens_on_its_own_nodes_only(
    cluster_nats: EmbeddedNats, prefix: str
) -> None:
    async with _raw(cluster_nats, "kubelet-0") as (nc, seen):
        await nc.subscribe(control.node_subject(prefix, "node-a"))
        await nc.flush()
        await asyncio.sleep(0.1)
        assert seen == []
        await nc.subscribe(control.node_subject(prefix, "node-b"))
        assert "subscription" in await _violation(seen, nc)


async def test_a_kubelet_follows_its_own_nodes_pod_events_only(
    cluster_nats: EmbeddedNats, prefix: str
) -> None:
    async with _raw(cluster_nats, "kubelet-0") as (nc, seen):
        await nc.subscribe(subjects.events_of(prefix, "pods", node="node-a"))
        await nc.flush()
        assert seen == []
        await nc.subscribe(subjects.events_of(prefix, "pods", node="node-b"))
        assert "subscription" in await _violation(seen, nc)


async def test_a_kubelet_watches_its_own_nodes_pods_only(
    apistore: ApiServer, cluster_nats: EmbeddedNats, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A refused consumer is a request the server drops: no need to wait long for it.
    monkeypatch.setattr(consumer, "_CREATE_TIMEOUT_S", 0.5)
    async with _bus(cluster_nats, "admin", prefix) as admin:
        api = ApiClient(admin, actor="admin")
        for name, node in (("on-a", "node-a"), ("on-b", "node-b")):
            pod = _pod(name)
            pod.spec.node_name = node
            await api.create(pod)
    async with _bus(cluster_nats, "kubelet-0", prefix) as bus:
        events = watch_nodes_raw(bus, "pods", ["node-a"], resource_version=0)
        async with contextlib.aclosing(events):
            _, event = await anext(events)
        assert codec.decode(event.object, core_v1.Pod).metadata.name == "on-a"
        # Another node's pods, the whole stream, stream info: refused by the server.
        for refused in (
            watch_nodes_raw(bus, "pods", ["node-b"], resource_version=0),
            watch_raw(bus, "pods", resource_version=0),
            watch_raw(bus, None, resource_version=0),
        ):
            async with contextlib.aclosing(refused):
                with pytest.raises(nats.errors.TimeoutError):
                    await anext(refused)
        info = f"$JS.API.STREAM.INFO.{subjects.stream(prefix)}"
        with pytest.raises(nats.errors.TimeoutError):
            await bus.request(info, b"", timeout=0.5)


async def test_fault_plans_need_the_flag(
    apistore: ApiServer, cluster_nats: EmbeddedNats, prefix: str
) -> None:
    async with _bus(cluster_nats, "admin", prefix) as admin:
        with pytest.raises(nats.errors.NoRespondersError):
            await admin.nc.request(
                subjects.control(prefix, "apistore", "faults"), b'{"rules": []}', timeout=2
            )
    async with _raw(cluster_nats, "scheduler") as (nc, seen):
        await nc.publish(subjects.control(prefix, "apistore", "faults"), b'{"rules": []}')
        assert "publish" in await _violation(seen, nc)


async def test_the_scheduler_watches_what_its_role_lets_it_watch(
    apistore: ApiServer, cluster_nats: EmbeddedNats, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A refused consumer is a request the server drops: no need to wait long for it.
    monkeypatch.setattr(consumer, "_CREATE_TIMEOUT_S", 0.5)
    async with _bus(cluster_nats, "admin", prefix) as admin:
        await ApiClient(admin, actor="admin").create(_pod("p"))
    async with _bus(cluster_nats, "scheduler", prefix) as bus:
        events = watch_raw(bus, "pods", resource_version=0)
        async with contextlib.aclosing(events):
            _, event = await anext(events)
        assert codec.decode(event.object, core_v1.Pod).metadata.name == "p"
        # Its role lets it watch no ClusterRoles, and not the whole stream.
        for refused in (
            watch_raw(bus, "clusterroles", resource_version=0),
            watch_raw(bus, None, resource_version=0),
        ):
            async with contextlib.aclosing(refused):
                with pytest.raises(nats.errors.TimeoutError):
                    await anext(refused)
    # The controller manager's informers watch every kind, ClusterRoles among them.
    async with _bus(cluster_nats, "controllers", prefix) as bus:
        events = watch_raw(bus, "clusterroles", resource_version=0)
        async with contextlib.aclosing(events):
            _, event = await anext(events)
        assert event.type == "ADDED"


def test_cluster_users_name_every_service() -> None:
    users = {user.name: user for user in nats_auth.cluster_users("drasim", [["n1", "n2"]])}
    assert set(users) == {"admin", "apistore", "scheduler", "controllers", "kubelet-0"}
    assert users["apistore"].admin and users["admin"].admin
    assert users["scheduler"].actors == ("system:kube-scheduler",)
    assert users["controllers"].actors == (
        "system:kube-controller-manager",
        "system:serviceaccount:kube-system:deployment-controller",
        "system:serviceaccount:kube-system:replicaset-controller",
        "system:serviceaccount:kube-system:resource-claim-controller",
        "system:serviceaccount:kube-system:disruption-controller",
        "system:serviceaccount:kube-system:clusterrole-aggregation-controller",
        "system:serviceaccount:kube-system:resourcequota-controller",
        "system:serviceaccount:kube-system:device-taint-eviction-controller",
        "system:serviceaccount:kube-system:job-controller",
        "system:serviceaccount:kube-system:cronjob-controller",
        "system:serviceaccount:kube-system:daemon-set-controller",
        "system:serviceaccount:kube-system:statefulset-controller",
        "system:serviceaccount:kube-system:ttl-after-finished-controller",
        "system:serviceaccount:kube-system:service-account-controller",
        "system:serviceaccount:kube-system:root-ca-cert-publisher",
        # The emulated DRA drivers' controller, as the drivers' own service account.
        "system:serviceaccount:kube-system:dra-driver",
    )
    # What each may watch is what its bootstrap roles let it watch.
    assert set(users["scheduler"].watches or ()) == {
        f"drasim.ev.{kind}.>"
        for kind in (
            "namespaces",
            "nodes",
            "pods",
            "replicasets",
            "poddisruptionbudgets",
            "deviceclasses",
            "resourceslices",
            "resourceclaims",
            "devicetaintrules",
        )
    }
    assert "drasim.ev.clusterroles.>" in (users["controllers"].watches or ())
    kubelet = users["kubelet-0"].permissions("drasim")
    assert kubelet is not None
    assert {"drasim.api.system:node:n1", "drasim.api.system:node:n2"} <= set(
        kubelet["publish"]["allow"]
    )
    assert not any(s.endswith(".api.kubelet") for s in kubelet["publish"]["allow"])
    assert "drasim.ctl.kubelet.n2" in kubelet["subscribe"]["allow"]
    # Its own nodes' announced last pod events (`drasim.common.follow`), no other node's.
    heads = [s for s in kubelet["subscribe"]["allow"] if ".heads." in s]
    assert heads == ["drasim.heads.pods.n1", "drasim.heads.pods.n2"]
    assert not any(s.startswith("drasim.ev") for s in kubelet["publish"]["allow"])
