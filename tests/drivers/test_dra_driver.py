"""The DRA driver shim: ResourceSlices and NodePrepareResources / NodeUnprepareResources."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from drasim.common import codec
from drasim.common.api import core_v1, meta_v1, resource_v1
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.cluster_file import DeviceGroup, NodeProfile
from drasim.common.quantity import Quantity
from drasim.drivers import cdi, dra_api
from drasim.drivers.dra_driver import DraDriver
from drasim.drivers.probe import EmulatedProbe
from tests.builders import make_pod
from tests.kubelet.scheduling import create_special_claim

NODE = "node-a"
DRIVER = "gpu.example.com"

MakeDriver = Callable[..., DraDriver]


@pytest.fixture
async def node_uid(api: ApiClient) -> str:
    """The Node the slices belong to (their owner)."""
    node = await api.create(core_v1.Node(metadata=meta_v1.ObjectMeta(name=NODE)))
    return node.metadata.uid


@pytest.fixture
async def make_driver(api: ApiClient, tmp_path: Path) -> AsyncIterator[MakeDriver]:
    made: list[DraDriver] = []

    def make(probe: EmulatedProbe, *, registry: cdi.Registry | None = None) -> DraDriver:
        driver = DraDriver(
            api=api,
            bus=api.bus,
            node=NODE,
            driver=DRIVER,
            probe=probe,
            cdi_registry=registry or cdi.Registry(),
            checkpoint_path=tmp_path / "plugins" / f"{DRIVER}.json",
        )
        made.append(driver)
        return driver

    yield make
    for driver in made:
        await driver.close()


async def claim_for(api: ApiClient, results: list[tuple[str, str]], *, pool: str = NODE):
    pod = await api.create(make_pod("p").obj())
    return await create_special_claim(api, pod, NODE, results, pool=pool)


def ref(claim: resource_v1.ResourceClaim) -> dra_api.Claim:
    return dra_api.Claim(
        namespace=claim.metadata.namespace, uid=claim.metadata.uid, name=claim.metadata.name
    )


async def test_prepare_over_nats_is_idempotent_and_checkpointed(
    api: ApiClient, bus: Bus, gpu8: EmulatedProbe, make_driver: MakeDriver, node_uid: str
) -> None:
    registry = cdi.Registry()
    driver = make_driver(gpu8, registry=registry)
    await driver.serve({"gpu"}, node_uid=node_uid)
    claim = await claim_for(
        api, [("container-0-request-0", "gpu-1"), ("container-1-request-0", "gpu-2")]
    )
    client = dra_api.DraPluginClient(bus, node=NODE, driver=DRIVER)

    first = await client.prepare([ref(claim)])
    uid = claim.metadata.uid
    devices = first.claims[uid].devices
    assert [(d.device_name, d.request_names, d.cdi_device_ids) for d in devices] == [
        ("gpu-1", ["container-0-request-0"], [f"gpu.example.com/gpu={uid}-gpu-1"]),
        ("gpu-2", ["container-1-request-0"], [f"gpu.example.com/gpu={uid}-gpu-2"]),
    ]
    assert registry.env(devices[0].cdi_device_ids) == {"container_0_request_0": "true"}
    assert (await client.prepare([ref(claim)])) == first
    assert driver.prepare_count == 1
    await driver.close()

    # A new process: the checkpoint answers, nothing is prepared again, CDI specs are back.
    registry = cdi.Registry()
    restarted = make_driver(gpu8, registry=registry)
    await restarted.serve({"gpu"}, node_uid=node_uid)
    assert (await client.prepare([ref(claim)])) == first
    assert restarted.prepare_count == 0
    assert registry.env(devices[1].cdi_device_ids) == {"container_1_request_0": "true"}

    assert (await client.unprepare([ref(claim)])).claims[uid].error == ""
    assert restarted.prepared_devices() == {}
    assert registry.env(devices[1].cdi_device_ids) == {}
    assert (await client.unprepare([ref(claim)])).claims[uid].error == ""  # idempotent


async def test_prepare_refuses_devices_that_are_not_its_own(
    api: ApiClient, gpu8: EmulatedProbe, make_driver: MakeDriver, node_uid: str
) -> None:
    driver = make_driver(gpu8)
    await driver.serve({"gpu"}, node_uid=node_uid)
    elsewhere = await claim_for(api, [("r", "gpu-1")], pool="node-b")
    unknown = await api.create(make_pod("q").obj())
    unknown_claim = await create_special_claim(api, unknown, NODE, [("r", "gpu-9")])
    stale = dra_api.Claim(namespace="default", uid="not-the-uid", name=elsewhere.metadata.name)
    missing = dra_api.Claim(namespace="default", uid="x", name="missing")

    response = await driver.node_prepare_resources(
        dra_api.NodePrepareResourcesRequest(
            claims=[ref(elsewhere), ref(unknown_claim), stale, missing]
        )
    )
    errors = {uid: r.error for uid, r in response.claims.items()}
    assert errors == {
        elsewhere.metadata.uid: (
            f"device gpu.example.com/node-b/gpu-1 of ResourceClaim default/"
            f"{elsewhere.metadata.name} is not a device of driver {DRIVER} on node {NODE}"
        ),
        unknown_claim.metadata.uid: (
            f"device gpu.example.com/{NODE}/gpu-9 of ResourceClaim default/"
            f"{unknown_claim.metadata.name} is not a device of driver {DRIVER} on node {NODE}"
        ),
        "not-the-uid": (
            f"ResourceClaim default/{elsewhere.metadata.name} has UID {elsewhere.metadata.uid},"
            " not not-the-uid"
        ),
        "x": 'fetch ResourceClaim default/missing: resourceclaims.resource.k8s.io "missing" not'
        " found",
    }
    assert driver.prepare_count == 0


async def test_slices_follow_health_with_a_new_generation_each_time(
    api: ApiClient, gpu8: EmulatedProbe, make_driver: MakeDriver, node_uid: str
) -> None:
    driver = make_driver(gpu8)
    await driver.serve({"gpu"}, node_uid=node_uid)
    gpu8.set_health("gpu-0", healthy=False)
    await driver.publish()  # the health listener's republish may still be in flight
    (pool,) = (await api.list(resource_v1.ResourceSlice))[0]
    assert pool.spec.pool.generation == 2
    assert [d.name for d in pool.spec.devices] == [f"gpu-{i}" for i in range(1, 8)]

    await driver.withdraw()
    assert (await api.list(resource_v1.ResourceSlice))[0] == []


async def test_a_pool_of_more_than_128_devices_spans_several_slices(
    api: ApiClient, make_driver: MakeDriver, node_uid: str
) -> None:
    profile = NodeProfile(
        name="big",
        cpu=Quantity(1),
        memory=Quantity(1),
        devices=[DeviceGroup(name="gpu", driver=DRIVER, count=130)],
    )
    driver = make_driver(EmulatedProbe(profile))
    await driver.serve({"gpu"}, node_uid=node_uid)
    slices = sorted((await api.list(resource_v1.ResourceSlice))[0], key=lambda s: s.metadata.name)
    assert [len(s.spec.devices) for s in slices] == [128, 2]
    assert {(s.spec.pool.generation, s.spec.pool.resource_slice_count) for s in slices} == {(1, 2)}


async def test_a_device_given_with_admin_access_tells_the_container(
    api: ApiClient, bus: Bus, gpu8: EmulatedProbe, make_driver: MakeDriver, node_uid: str
) -> None:
    """As the example DRA driver does: `DRA_ADMIN_ACCESS=true` in the device's CDI edits."""
    label = {resource_v1.DRA_ADMIN_NAMESPACE_LABEL_KEY: "true"}
    await api.create(core_v1.Namespace(metadata=meta_v1.ObjectMeta(name="ops", labels=label)))
    registry = cdi.Registry()
    driver = make_driver(gpu8, registry=registry)
    await driver.serve({"gpu"}, node_uid=node_uid)
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "adminAccess": True}}
    claim = await api.create(
        codec.convert(
            {"metadata": {"name": "admin", "namespace": "ops"},
             "spec": {"devices": {"requests": [request]}}},
            resource_v1.ResourceClaim,
        )
    )  # fmt: skip
    claim.status.allocation = resource_v1.AllocationResult(
        devices=resource_v1.DeviceAllocationResult(
            results=[
                resource_v1.DeviceRequestAllocationResult(
                    request="gpu", driver=DRIVER, pool=NODE, device="gpu-3", admin_access=True
                )
            ]
        )
    )
    claim = await api.update_status(claim)
    client = dra_api.DraPluginClient(bus, node=NODE, driver=DRIVER)

    (device,) = (await client.prepare([ref(claim)])).claims[claim.metadata.uid].devices
    assert registry.env(device.cdi_device_ids) == {"gpu": "true", "DRA_ADMIN_ACCESS": "true"}
