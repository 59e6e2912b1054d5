"""Which DeviceClass serves an extended resource name (spec §2), fed by DeviceClass events.

This is upstream's incremental `ExtendedResourceCache`, quirks included (spec §2.5 a-e),
not a recomputation from all classes: the spec's D-tests pin down its event-order effects.
"""

from __future__ import annotations

from datetime import UTC, datetime

from drasim.common.api import resource_v1, resources

__all__ = ["ExtendedResourceCache"]

_NEVER = datetime.min.replace(tzinfo=UTC)


class ExtendedResourceCache:
    """Resource name → DeviceClass, and class name → its own explicit name.

    Every class `C` is reachable as `deviceclass.resource.kubernetes.io/C` (§2.1) and, if it
    sets `spec.extendedResourceName: X`, as `X` (§2.2). Several classes may declare the same
    `X`; the later `creationTimestamp` wins, equal timestamps go to the smaller name (§2.3).
    """

    def __init__(self) -> None:
        self._class_by_resource: dict[str, resource_v1.DeviceClass] = {}
        self._resource_by_class: dict[str, str] = {}

    def get_device_class(self, resource_name: str) -> resource_v1.DeviceClass | None:
        """The class that serves `resource_name` (implicit or explicit name), if any.

        The object is the one stored when the mapping was made; after §2.5 a) it may be older
        than the informer's copy, so callers that need the spec should look the class up by
        name.
        """
        return self._class_by_resource.get(resource_name)

    def get_extended_resource(self, class_name: str) -> str | None:
        """The class's own explicit name, whether or not it wins that name (§2.5 e, quota)."""
        return self._resource_by_class.get(class_name)

    def on_add(self, cls: resource_v1.DeviceClass) -> None:
        self._map_resource_names(cls, None)
        self._index_class(cls)

    def on_update(self, old: resource_v1.DeviceClass, new: resource_v1.DeviceClass) -> None:
        self._map_resource_names(new, old)
        self._index_class(new)

    def on_delete(self, cls: resource_v1.DeviceClass) -> None:
        # §2.5 d): the class's explicit name goes even if another class currently holds it.
        self._class_by_resource.pop(_implicit_name(cls), None)
        if cls.spec.extended_resource_name:
            self._class_by_resource.pop(cls.spec.extended_resource_name, None)
        self._resource_by_class.pop(cls.metadata.name, None)

    def _map_resource_names(
        self, new: resource_v1.DeviceClass, old: resource_v1.DeviceClass | None
    ) -> None:
        explicit = new.spec.extended_resource_name
        holder = self._class_by_resource.get(explicit) if explicit else None
        if holder is not None and not _wins_over(new, holder):
            # §2.5 a): the whole event is dropped, implicit name included. This also drops an
            # update of the current holder that keeps the name (it does not win over itself),
            # so the stored object stays the old one.
            return
        # §2.5 b), c): forget the old names, then map the new ones. Losers that still declare
        # the old explicit name are not promoted.
        if old is not None:
            self._class_by_resource.pop(_implicit_name(old), None)
            if old.spec.extended_resource_name:
                self._class_by_resource.pop(old.spec.extended_resource_name, None)
        if explicit:
            self._class_by_resource[explicit] = new
        self._class_by_resource[_implicit_name(new)] = new

    def _index_class(self, cls: resource_v1.DeviceClass) -> None:
        if cls.spec.extended_resource_name:
            self._resource_by_class[cls.metadata.name] = cls.spec.extended_resource_name
        else:
            self._resource_by_class.pop(cls.metadata.name, None)


def _implicit_name(cls: resource_v1.DeviceClass) -> str:
    return resources.IMPLICIT_EXTENDED_RESOURCE_PREFIX + cls.metadata.name


def _wins_over(new: resource_v1.DeviceClass, holder: resource_v1.DeviceClass) -> bool:
    """§2.3: the newer class wins; at equal time the lexicographically smaller name does."""
    new_time, holder_time = _created(new), _created(holder)
    if new_time != holder_time:
        return new_time > holder_time
    return new.metadata.name < holder.metadata.name


def _created(cls: resource_v1.DeviceClass) -> datetime:
    """The creation time; a class without one (never stored) sorts as the oldest."""
    stamp = cls.metadata.creation_timestamp
    return datetime.fromisoformat(stamp) if stamp else _NEVER
