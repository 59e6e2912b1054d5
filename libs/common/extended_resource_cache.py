"""Which DeviceClass serves an extended resource name, and which name a class declares,
fed by DeviceClass events.

Upstream: `staging/src/k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache/
extendedresourcecache.go` as kubernetes#141110 left it. The scheduler resolves the names a
pod requests with it; quota charges a claim's devices to the name its class declares. The
kubelet needs neither: it reads the request mappings the scheduler wrote into the pod.

Several classes may declare the same `extendedResourceName`, typically while a cluster
moves from one class to another. Every class that declares a name stays a candidate for it,
and the winner is recomputed from the candidates on every add, update and delete, so that
deleting or renaming the winner hands the name to the next best class instead of leaving it
unmapped, and an update of any class replaces the stored object.
"""

from __future__ import annotations

from datetime import UTC, datetime

from drasim.common.api import resource_v1, resources

__all__ = ["ExtendedResourceCache", "better_device_class", "implicit_name"]

_NEVER = datetime.min.replace(tzinfo=UTC)


class ExtendedResourceCache:
    """Resource name → DeviceClass, and class name → the name it declares.

    Every class `C` is reachable as `deviceclass.resource.kubernetes.io/C` (upstream
    `ResourceDeviceClassPrefix`): that name is unique to it, so no arbitration applies and a
    class losing its explicit name keeps it. A class with `spec.extendedResourceName: X` is
    a candidate for `X`; of the candidates, the newest wins, equal creation times going to
    the smaller name (`better_device_class`).
    """

    def __init__(self) -> None:
        # explicit name -> class name -> the newest object of each class declaring it
        self._candidates: dict[str, dict[str, resource_v1.DeviceClass]] = {}
        # implicit names -> their class; explicit names -> the winning candidate
        self._class_by_resource: dict[str, resource_v1.DeviceClass] = {}
        # class name -> the explicit name it declares, winning or not
        self._resource_by_class: dict[str, str] = {}

    def class_for(self, resource_name: str) -> resource_v1.DeviceClass | None:
        """The class serving `resource_name`, an implicit or explicit name (upstream
        `GetDeviceClass`); the object is the newest the cache was given."""
        return self._class_by_resource.get(resource_name)

    def extended_resource_name_of(self, class_name: str) -> str | None:
        """The explicit name the class declares, whether or not it wins that name
        (upstream `GetExtendedResource`): what quota charges the class's devices to."""
        return self._resource_by_class.get(class_name)

    def on_add(self, cls: resource_v1.DeviceClass) -> None:
        self._store(cls)

    def on_update(self, old: resource_v1.DeviceClass, new: resource_v1.DeviceClass) -> None:
        # The class leaves the candidates of whatever name it declared before; `old` itself
        # is not trusted for that name, as an informer's old object may be stale.
        self._forget(old.metadata.name)
        self._store(new)

    def on_delete(self, cls: resource_v1.DeviceClass) -> None:
        self._forget(cls.metadata.name)

    def _store(self, cls: resource_v1.DeviceClass) -> None:
        name = cls.metadata.name
        explicit = cls.spec.extended_resource_name
        if explicit:
            self._candidates.setdefault(explicit, {})[name] = cls
            self._resource_by_class[name] = explicit
            self._elect(explicit)
        self._class_by_resource[implicit_name(name)] = cls

    def _forget(self, class_name: str) -> None:
        """Remove every mapping the class owns; the next best candidate takes over its
        explicit name, and a name it merely lost stays with its winner."""
        self._class_by_resource.pop(implicit_name(class_name), None)
        explicit = self._resource_by_class.pop(class_name, None)
        if explicit is None:
            return
        candidates = self._candidates.get(explicit, {})
        candidates.pop(class_name, None)
        if not candidates:
            self._candidates.pop(explicit, None)
        self._elect(explicit)

    def _elect(self, explicit: str) -> None:
        winner: resource_v1.DeviceClass | None = None
        for candidate in self._candidates.get(explicit, {}).values():
            if better_device_class(candidate, winner):
                winner = candidate
        if winner is None:
            self._class_by_resource.pop(explicit, None)
        else:
            self._class_by_resource[explicit] = winner


def implicit_name(class_name: str) -> str:
    """`deviceclass.resource.kubernetes.io/<class>`: the name every class is requested by."""
    return resources.IMPLICIT_EXTENDED_RESOURCE_PREFIX + class_name


def better_device_class(
    a: resource_v1.DeviceClass | None, b: resource_v1.DeviceClass | None
) -> bool:
    """Whether `a` wins an explicit name over `b`, as upstream's cache prefers "the newer
    DeviceClass" with "the name as tie-breaker": the newer class wins, equal times
    go to the smaller name; a class is never better than itself, any class beats none."""
    if a is None:
        return False
    if b is None:
        return True
    a_time, b_time = _created(a), _created(b)
    if a_time != b_time:
        return a_time > b_time
    return a.metadata.name < b.metadata.name


def _created(cls: resource_v1.DeviceClass) -> datetime:
    """The creation time; a class without one (never stored) sorts as the oldest."""
    stamp = cls.metadata.creation_timestamp
    return datetime.fromisoformat(stamp) if stamp else _NEVER
