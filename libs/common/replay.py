"""Fold the event log into cluster state: the log alone rebuilds any past moment.

The fold of events up to resourceVersion R is the state a list at R returns; `drasim replay`
shows it and `drasim replay --verify` checks the live projection against it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec

from drasim.common.bus import messages

Key = tuple[str, str, str]  # (resource, namespace, name)


@dataclass
class ClusterView:
    """Objects as JSON by key, as of `resource_version`."""

    objects: dict[Key, bytes] = field(default_factory=dict)
    resource_version: int = 0

    def apply(self, event: messages.LoggedEvent) -> None:
        if event.seq <= self.resource_version:
            raise ValueError(f"event {event.seq} is not after {self.resource_version}")
        key = (event.resource, event.namespace, event.name)
        if event.type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = bytes(event.object)
        self.resource_version = event.seq

    def of(self, resource: str, namespace: str = "") -> dict[Key, bytes]:
        return {
            k: v
            for k, v in self.objects.items()
            if k[0] == resource and (not namespace or k[1] == namespace)
        }


def fold(events: Iterable[messages.LoggedEvent], view: ClusterView | None = None) -> ClusterView:
    view = view or ClusterView()
    for event in events:
        view.apply(event)
    return view


def first_difference(resource: str, folded: dict[Key, bytes], live: dict[Key, bytes]) -> str | None:
    """A description of the first object where the fold and the projection disagree."""
    for key in sorted(folded.keys() | live.keys()):
        a, b = folded.get(key), live.get(key)
        if a is None:
            return f"{resource} {key[1]}/{key[2]}: in the projection but not in the log's fold"
        if b is None:
            return f"{resource} {key[1]}/{key[2]}: in the log's fold but not in the projection"
        if msgspec.json.decode(a) != msgspec.json.decode(b):
            return f"{resource} {key[1]}/{key[2]}: fold and projection differ"
    return None
