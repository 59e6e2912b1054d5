"""DefaultBinder: binds the pod through the `pods/binding` subresource.

Upstream: `pkg/scheduler/framework/plugins/defaultbinder/default_binder.go`.
"""

from __future__ import annotations

from typing import ClassVar

from drasim.common import errors
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.scheduler import framework
from drasim.scheduler.plugins import names

__all__ = ["DefaultBinder"]


class DefaultBinder:
    """Bind. Any API error (the pod is gone, already bound, the server is away) fails the
    binding cycle, which then unreserves the pod and sends it to backoff.

    A request that timed out may have bound the pod all the same; unreserving then would
    free devices the bound pod uses. So it is sent once more: the apistore applies writes
    in order, and "already assigned to" this node means the first one did bind it.
    """

    name: ClassVar[str] = names.DEFAULT_BINDER

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def bind(
        self, state: framework.CycleState, pod: core_v1.Pod, node_name: str
    ) -> framework.Status | None:
        try:
            try:
                await self.api.bind(pod, node_name)
            except errors.Timeout:
                await self.api.bind(pod, node_name)
        except errors.Conflict as err:
            if f'already assigned to node "{node_name}"' in err.message:
                return None  # the request that timed out bound it
            return framework.Status.error(err)
        except errors.ApiError as err:
            return framework.Status.error(err)
        return None
