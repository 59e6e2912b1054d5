"""Device-plugin allocation for one pod at admission (upstream `cm/devicemanager`).

Containers are allocated in start order: init containers, then regular ones. A regular
init container runs to completion before the next starts, so its devices are handed on to
the containers after it instead of taking new ones; a sidecar (restartable init
container) keeps running, so its devices are not handed on. This is how the pod's
effective request (the max over init containers, upstream `PodRequests`) is all the node
counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from drasim.common.api import core_v1, resources
from drasim.drivers.device_plugin import AllocateResponse, DevicePlugin

__all__ = ["allocate_pod"]


def allocate_pod(
    pod: core_v1.Pod,
    plugins: Mapping[str, DevicePlugin],
    *,
    observe: Callable[[str, float], None] | None = None,
) -> dict[str, dict[str, AllocateResponse]]:
    """Container name → resource name → what Allocate gave it.

    Raises the plugin's `PermanentError` (after releasing what the pod got) when a plugin
    cannot serve a container: the kubelet then rejects the pod. `observe(resource name,
    seconds)` is told how long each Allocate call took.
    """
    uid = pod.metadata.uid
    reusable: dict[str, set[str]] = {name: set() for name in plugins}
    given: dict[str, dict[str, AllocateResponse]] = {}
    order = [(c, True) for c in pod.spec.init_containers] + [
        (c, False) for c in pod.spec.containers
    ]
    try:
        for container, is_init in order:
            requests = resources.container_requests(container)
            for name, plugin in plugins.items():
                quantity = requests.get(name)
                if quantity is None or quantity.is_zero():
                    continue
                started = time.perf_counter()
                response = plugin.allocate(
                    uid, container.name, quantity.int_value(), reusable=reusable[name]
                )
                if observe is not None:
                    observe(name, time.perf_counter() - started)
                given.setdefault(container.name, {})[name] = response
                if is_init and not resources.is_restartable_init_container(container):
                    reusable[name].update(response.device_ids)
                else:
                    reusable[name].difference_update(response.device_ids)
    except Exception:
        for plugin in plugins.values():
            plugin.release(uid)
        raise
    return given
