"""Awaiting what the cluster shows, through the watch: no sleeping, no polling."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from drasim.common import watch
from drasim.common.api import core_v1
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.client import ApiClient

T = TypeVar("T", bound=KubeObject)

TIMEOUT = 15.0


async def wait_for(
    api: ApiClient,
    type_: type[T],
    name: str,
    condition: Callable[[T | None], bool],
    *,
    namespace: str = "",
    timeout: float = TIMEOUT,
) -> T | None:
    """The object once `condition` holds (it sees None while the object does not exist)."""
    field_selector = f"metadata.name={name}"
    async with asyncio.timeout(timeout):
        items, rv = await api.list(type_, namespace=namespace, field_selector=field_selector)
        current = items[0] if items else None
        if condition(current):
            return current
        async for event in watch.watch_resource(api.bus, type_, resource_version=rv):
            obj = event.object
            if obj.metadata.name != name or (namespace and obj.metadata.namespace != namespace):
                continue
            current = None if event.type == "DELETED" else obj
            if condition(current):
                return current
    raise AssertionError("the watch ended")


async def wait_for_event(
    api: ApiClient, *, pod: str, reason: str, namespace: str = "default", timeout: float = TIMEOUT
) -> str:
    """The message of the first Event `reason` about pod `pod`."""
    async with asyncio.timeout(timeout):
        items, rv = await api.list(core_v1.Event, namespace=namespace)
        for event in items:
            if event.involved_object.name == pod and event.reason == reason:
                return event.message
        async for change in watch.watch_resource(api.bus, core_v1.Event, resource_version=rv):
            event = change.object
            if event.involved_object.name == pod and event.reason == reason:
                return event.message
    raise AssertionError("the watch ended")


async def wait_for_all(
    api: ApiClient,
    type_: type[T],
    condition: Callable[[list[T]], bool],
    *,
    namespace: str = "",
    timeout: float = TIMEOUT,
) -> list[T]:
    """Every object of the kind (in `namespace`), once `condition` holds for them."""
    async with asyncio.timeout(timeout):
        items, rv = await api.list(type_, namespace=namespace)
        current = {(o.metadata.namespace, o.metadata.name): o for o in items}
        if condition(list(current.values())):
            return list(current.values())
        async for event in watch.watch_resource(api.bus, type_, resource_version=rv):
            obj = event.object
            if namespace and obj.metadata.namespace != namespace:
                continue
            key = (obj.metadata.namespace, obj.metadata.name)
            if event.type == "DELETED":
                current.pop(key, None)
            else:
                current[key] = obj
            if condition(list(current.values())):
                return list(current.values())
    raise AssertionError("the watch ended")
