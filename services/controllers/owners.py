"""Controller ownership: who controls an object, and the index from an owner to what it controls.

Kubernetes controllers find their dependents through the controller ownerReference
(`metav1.GetControllerOf`), via an informer index keyed by the owner's UID (upstream's
`claimPodOwnerIndex`; the ReplicaSet and Deployment controllers do the same by listing).
"""

from __future__ import annotations

from typing import Any

from drasim.common.api.meta_v1 import KubeObject, OwnerReference
from drasim.common.informer import Informer, Key, key_of


def controller_ref(obj: KubeObject, *, kind: str, api_version: str) -> OwnerReference | None:
    """The object's controller ownerReference if its controller is of this kind."""
    ref = obj.metadata.controller_ref()
    if ref is None or ref.kind != kind or ref.api_version != api_version:
        return None
    return ref


def new_controller_ref(owner: KubeObject) -> OwnerReference:
    """`metav1.NewControllerRef`: controller, and blocking the owner's foreground deletion."""
    return OwnerReference(
        api_version=owner.api_version,
        kind=owner.kind,
        name=owner.metadata.name,
        uid=owner.metadata.uid,
        controller=True,
        block_owner_deletion=True,
    )


class OwnerIndex:
    """Keys of the objects each owner (by UID) controls, kept current by their informer.

    Attach it to the informer before any handler that reads it, so that it is updated first.
    """

    def __init__(self, *, kind: str, api_version: str) -> None:
        self.kind = kind
        self.api_version = api_version
        self._keys: dict[str, set[Key]] = {}

    def attach(self, informer: Informer[Any]) -> None:
        informer.add_handlers(on_add=self._add, on_update=self._update, on_delete=self._delete)

    def keys(self, owner_uid: str) -> set[Key]:
        return self._keys.get(owner_uid, set())

    def _owner(self, obj: KubeObject) -> str:
        ref = controller_ref(obj, kind=self.kind, api_version=self.api_version)
        return ref.uid if ref is not None else ""

    def _add(self, obj: KubeObject) -> None:
        if owner := self._owner(obj):
            self._keys.setdefault(owner, set()).add(key_of(obj))

    def _update(self, old: KubeObject, new: KubeObject) -> None:
        if self._owner(old) != self._owner(new):
            self._delete(old)
        self._add(new)

    def _delete(self, obj: KubeObject) -> None:
        owner = self._owner(obj)
        keys = self._keys.get(owner)
        if keys is None:
            return
        keys.discard(key_of(obj))
        if not keys:
            del self._keys[owner]
