"""Controller ownership: who controls an object, and the index from an owner to what it controls.

Kubernetes controllers find their dependents through the controller ownerReference
(`metav1.GetControllerOf`), via an informer index keyed by the owner's UID (upstream's
`claimPodOwnerIndex`; the ReplicaSet and Deployment controllers do the same by listing).

`PodOwnerIndex` also counts, per owner, the pods a ReplicaSet's status reports, so that a
sync reads counts instead of walking thousands of pods.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from drasim.common import labels
from drasim.common.api import core_v1
from drasim.common.api.meta_v1 import KubeObject, OwnerReference
from drasim.common.informer import Informer, Key, key_of
from drasim.controllers import podutil


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


@dataclass(frozen=True, slots=True)
class _ActivePod:
    """What one version of an active pod counts for (informer objects are replaced on
    update, never changed, so this stays true until the pod's next event)."""

    owner: str
    ready: bool  # podutil.is_pod_ready
    # podutil.is_pod_available with minReadySeconds 0: its (first) Ready condition is True.
    available: bool
    labels: dict[str, str]


@dataclass(slots=True)
class ActivePods:
    """One owner's active pods (`controller.IsPodActive`) by key, and the subsets that a
    ReplicaSet's status counts (upstream `calculateStatus`)."""

    active: set[Key] = field(default_factory=set)
    ready: set[Key] = field(default_factory=set)
    available: set[Key] = field(default_factory=set)  # with minReadySeconds 0
    # `fully_labeled` counts the active pods that `labeled_by` (the owner's template labels)
    # matches; None until asked, and recounted when asked for other labels.
    labeled_by: labels.Selector | None = None
    fully_labeled: int = 0

    def _add(self, key: Key, pod: _ActivePod) -> None:
        self.active.add(key)
        if pod.ready:
            self.ready.add(key)
        if pod.available:
            self.available.add(key)
        if self.labeled_by is not None and self.labeled_by.matches(pod.labels):
            self.fully_labeled += 1

    def _discard(self, key: Key, pod: _ActivePod) -> None:
        self.active.discard(key)
        self.ready.discard(key)
        self.available.discard(key)
        if self.labeled_by is not None and self.labeled_by.matches(pod.labels):
            self.fully_labeled -= 1


class PodOwnerIndex:
    """An `OwnerIndex` of pods that also keeps each owner's `ActivePods` current.

    Each pod event costs O(1): the pod's contribution (`_ActivePod`) is computed once per
    version and remembered by key, so an update takes back the old one and adds the new
    one, a delete takes it back, and a change of controller moves it. Attach it to the
    informer before any handler that reads it, as an `OwnerIndex`.
    """

    def __init__(self, *, kind: str, api_version: str) -> None:
        self.kind = kind
        self.api_version = api_version
        self._keys = OwnerIndex(kind=kind, api_version=api_version)
        self._active: dict[Key, _ActivePod] = {}
        self._counts: dict[str, ActivePods] = {}

    def attach(self, informer: Informer[Any]) -> None:
        self._keys.attach(informer)
        informer.add_handlers(
            on_add=self._count,
            on_update=lambda _old, new: self._count(new),
            on_delete=lambda pod: self._uncount(key_of(pod)),
        )

    def keys(self, owner_uid: str) -> set[Key]:
        return self._keys.keys(owner_uid)

    def active(self, owner_uid: str) -> ActivePods:
        """The owner's active pods now; read-only, and changed by the next pod event."""
        return self._counts.get(owner_uid) or ActivePods()

    def active_keys(self, owner_uid: str) -> Iterator[Key]:
        """The owner's active pods, in `keys` order."""
        active = self.active(owner_uid).active
        return (key for key in self.keys(owner_uid) if key in active)

    def fully_labeled(self, owner_uid: str, template: labels.Selector) -> int:
        """How many of the owner's active pods `template` matches. Counted by a walk only
        when the template differs from the last one asked for (a new template is rare: the
        Deployment controller makes a new ReplicaSet for a new template)."""
        counts = self._counts.get(owner_uid)
        if counts is None:
            return 0
        if counts.labeled_by != template:
            counts.labeled_by = template
            counts.fully_labeled = sum(
                template.matches(self._active[key].labels) for key in counts.active
            )
        return counts.fully_labeled

    def _count(self, pod: core_v1.Pod) -> None:
        key = key_of(pod)
        self._uncount(key)
        ref = controller_ref(pod, kind=self.kind, api_version=self.api_version)
        if ref is None or not ref.uid or not podutil.is_pod_active(pod):
            return
        owner = ref.uid
        condition = podutil.ready_condition(pod)
        active = _ActivePod(
            owner=owner,
            ready=podutil.is_pod_ready(pod),
            available=condition is not None and condition.status == "True",
            labels=pod.metadata.labels,
        )
        self._active[key] = active
        counts = self._counts.get(owner)
        if counts is None:
            counts = self._counts[owner] = ActivePods()
        counts._add(key, active)

    def _uncount(self, key: Key) -> None:
        active = self._active.pop(key, None)
        if active is None:
            return
        counts = self._counts[active.owner]
        counts._discard(key, active)
        if not counts.active:
            del self._counts[active.owner]


def attached_pod_index(pods: Informer[core_v1.Pod]) -> PodOwnerIndex:
    """ReplicaSets' pods, indexed by owner and attached to `pods`: one per controller
    manager, shared by the ReplicaSet and Deployment controllers."""
    index = PodOwnerIndex(kind="ReplicaSet", api_version="apps/v1")
    index.attach(pods)
    return index
