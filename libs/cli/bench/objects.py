"""Creating and listing objects as raw JSON through the apistore's NATS API: a workload
creates thousands of objects from rendered templates, with no typed decode on the way."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import msgspec

from drasim.cli.bench import views
from drasim.common import errors
from drasim.common.bus import messages
from drasim.common.client import ApiClient

CREATE_CONCURRENCY = 64  # creates in flight at once (the apistore pipelines them)
LIST_PAGE = 500  # one list reply must fit in a NATS message
GENERATE_NAME_TRIES = 8


async def create_raw(
    api: ApiClient, resource: str, namespace: str, body: bytes, *, generated: bool = False
) -> str:
    """Create one object from its JSON; its name (generated ones included).

    A `generated` name (metadata.generateName) that collides with an existing one is
    generated again, as kube-apiserver does (RetryGenerateName, up to 8 tries): 5 random
    characters collide often among thousands of objects.
    """
    request = messages.Create(resource=resource, namespace=namespace, object=msgspec.Raw(body))
    for attempt in range(GENERATE_NAME_TRIES):
        try:
            data = await api.request(request)
        except errors.AlreadyExists:
            if not generated or attempt == GENERATE_NAME_TRIES - 1:
                raise
            continue
        return views.name_decoder.decode(data).metadata.name
    raise AssertionError("unreachable")


async def create_many(
    api: ApiClient,
    resource: str,
    namespace: str,
    bodies: Iterable[bytes],
    *,
    generated: bool = False,
) -> list[str]:
    """Create objects from `CREATE_CONCURRENCY` writers; their names, in creation order."""
    items = list(enumerate(bodies))
    names = [""] * len(items)
    pending = iter(items)

    async def writer() -> None:
        for i, body in pending:
            names[i] = await create_raw(api, resource, namespace, body, generated=generated)

    await asyncio.gather(*(writer() for _ in range(min(CREATE_CONCURRENCY, len(items)))))
    return names


async def list_raw(api: ApiClient, resource: str, namespace: str = "") -> list[msgspec.Raw]:
    """Every object of a resource, a page at a time."""
    items: list[msgspec.Raw] = []
    token = ""
    while True:
        page = messages.list_result_decoder.decode(
            await api.request(
                messages.List(
                    resource=resource, namespace=namespace, limit=LIST_PAGE, continue_token=token
                )
            )
        )
        items += page.items
        token = page.continue_token
        if not token:
            return items


async def current_resource_version(api: ApiClient) -> int:
    page = messages.list_result_decoder.decode(
        await api.request(messages.List(resource="namespaces", limit=1))
    )
    return page.resource_version
