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
    binding cycle, which then unreserves the pod and sends it to backoff."""

    name: ClassVar[str] = names.DEFAULT_BINDER

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def bind(
        self, state: framework.CycleState, pod: core_v1.Pod, node_name: str
    ) -> framework.Status | None:
        try:
            await self.api.bind(pod, node_name)
        except errors.ApiError as err:
            return framework.Status.error(err)
        return None
