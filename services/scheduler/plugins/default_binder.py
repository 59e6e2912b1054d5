"""DefaultBinder: binds the pod through the `pods/binding` subresource.

Upstream: `pkg/scheduler/framework/plugins/defaultbinder/default_binder.go`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import ClassVar

from drasim.common import errors
from drasim.common.api import core_v1
from drasim.common.client import ApiClient
from drasim.scheduler import framework
from drasim.scheduler.plugins import names

__all__ = ["DefaultBinder"]

log = logging.getLogger(__name__)

# How long a binding whose outcome is unknown is sent again before the binder gives up.
OUTCOME_TIMEOUT = 120.0
RETRY_BACKOFF = (0.1, 2.0)  # first and longest wait between two sends


class DefaultBinder:
    """Bind. Any API error (the pod is gone, already bound, the server is away) fails the
    binding cycle, which then unreserves the pod and sends it to backoff.

    Except when the binding may have happened: a request that timed out or whose
    connection broke (a `Timeout`) may have bound the pod all the same, and unreserving
    would then delete the special claim, and clear the status naming it, of a pod bound
    on a DRA node, which would run without its devices. So the binding is sent again
    until an answer settles it, whatever the apistore, NATS or Postgres went through
    meanwhile: the apistore applies writes in order, and "already assigned to" this node
    means an earlier send bound it. Upstream fails the binding on the first error; a
    binding lost in its answer is rare with etcd behind kube-apiserver, and common when
    a chaos run kills NATS.
    """

    name: ClassVar[str] = names.DEFAULT_BINDER

    def __init__(
        self,
        api: ApiClient,
        *,
        outcome_timeout: float = OUTCOME_TIMEOUT,
        backoff: tuple[float, float] = RETRY_BACKOFF,
    ) -> None:
        self.api = api
        self.outcome_timeout = outcome_timeout
        self.backoff = backoff

    async def bind(
        self, state: framework.CycleState, pod: core_v1.Pod, node_name: str
    ) -> framework.Status | None:
        uncertain_since: float | None = None  # when a send first left the outcome open
        delay, longest = self.backoff
        while True:
            try:
                await self.api.bind(pod, node_name)
                return None
            except errors.Conflict as err:
                if f'already assigned to node "{node_name}"' in err.message:
                    return None  # an earlier send bound it
                return framework.Status.error(err)
            except errors.Timeout as err:
                if uncertain_since is None:
                    uncertain_since = time.monotonic()
                last: errors.ApiError = err
            except errors.ApiError as err:
                # Any other answer settles this send; it settles an earlier one only if
                # the apistore could judge the binding (not a 5xx: Postgres away, say).
                if uncertain_since is None or err.code < 500:
                    return framework.Status.error(err)
                last = err
            if time.monotonic() - uncertain_since >= self.outcome_timeout:
                log.error(
                    "binding pod %s/%s to node %s: no answer settled it within %.0fs: %s",
                    pod.metadata.namespace,
                    pod.metadata.name,
                    node_name,
                    self.outcome_timeout,
                    last,
                )
                return framework.Status.error(last)
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)
