"""A node's Lease in `kube-node-lease`: created when the node registers and renewed as its
heartbeat (upstream `pkg/kubelet/nodelease`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from datetime import UTC, datetime

from drasim.common import errors
from drasim.common.api import coordination_v1, core_v1, meta_v1
from drasim.common.client import ApiClient

__all__ = ["LEASE_DURATION_SECONDS", "NODE_LEASE_NAMESPACE", "ensure_lease", "renew_forever"]

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40  # upstream nodeLeaseDurationSeconds; renewed every quarter


def _micro_now() -> str:
    """`metav1.MicroTime`, as Lease times are written."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def ensure_lease(api: ApiClient, node: core_v1.Node) -> None:
    """Create the node's Lease, owned by the Node, unless it exists."""
    name = node.metadata.name
    lease = coordination_v1.Lease(
        metadata=meta_v1.ObjectMeta(
            name=name,
            namespace=NODE_LEASE_NAMESPACE,
            owner_references=[
                meta_v1.OwnerReference(
                    api_version="v1", kind="Node", name=name, uid=node.metadata.uid
                )
            ],
        ),
        spec=coordination_v1.LeaseSpec(
            holder_identity=name,
            lease_duration_seconds=LEASE_DURATION_SECONDS,
            renew_time=_micro_now(),
        ),
    )
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(lease)


async def renew_forever(api: ApiClient, node: core_v1.Node, period: float) -> None:
    """Renew the Lease every period (upstream: 10 s), phases spread at random so a
    thousand nodes do not renew in the same instant."""
    name = node.metadata.name
    await asyncio.sleep(random.uniform(0, period))
    while True:
        try:
            try:
                await api.patch(
                    coordination_v1.Lease,
                    name,
                    {"spec": {"holderIdentity": name, "renewTime": _micro_now()}},
                    namespace=NODE_LEASE_NAMESPACE,
                )
            except errors.NotFound:
                await ensure_lease(api, node)
        except Exception as exc:  # the apistore or the bus is away: next period, again
            log.warning("node %s: renewing the lease failed: %s", name, exc)
        await asyncio.sleep(period)
