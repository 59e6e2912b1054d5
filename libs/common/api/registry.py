"""Every served resource in one table: names, group/version, scope, type, subresources.

The HTTP routes, the store, the CLI (`drasim get po`) and the bus subjects all look kinds
up here, so a kind is added in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from drasim.common.api import (
    apps_v1,
    coordination_v1,
    core_v1,
    policy_v1,
    rbac_v1,
    resource_v1,
    scheduling_v1,
)
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.errors import NotFound

__all__ = [
    "RESOURCES",
    "ResourceInfo",
    "by_api_version_kind",
    "by_kind",
    "by_plural",
    "by_type",
    "resolve",
]


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """One resource as discovery describes it (`metav1.APIResource`)."""

    kind: str
    plural: str
    singular: str
    group: str  # "" for the core group
    version: str
    namespaced: bool
    type: type[KubeObject]
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """`v1` for the core group, else `group/version`."""
        return f"{self.group}/{self.version}" if self.group else self.version


def _info(
    type_: type[KubeObject],
    plural: str,
    *,
    namespaced: bool,
    short_names: tuple[str, ...] = (),
    subresources: tuple[str, ...] = (),
) -> ResourceInfo:
    group, _, version = type_.API_VERSION.rpartition("/")
    return ResourceInfo(
        kind=type_.KIND,
        plural=plural,
        singular=type_.KIND.lower(),
        group=group,
        version=version,
        namespaced=namespaced,
        type=type_,
        short_names=short_names,
        subresources=subresources,
    )


RESOURCES: tuple[ResourceInfo, ...] = (
    _info(core_v1.Namespace, "namespaces", namespaced=False, short_names=("ns",),
          subresources=("status",)),
    _info(core_v1.Node, "nodes", namespaced=False, short_names=("no",), subresources=("status",)),
    _info(core_v1.Pod, "pods", namespaced=True, short_names=("po",),
          subresources=("status", "binding", "log", "eviction", "ephemeralcontainers")),
    _info(core_v1.Event, "events", namespaced=True, short_names=("ev",)),
    _info(core_v1.ResourceQuota, "resourcequotas", namespaced=True, short_names=("quota",),
          subresources=("status",)),
    _info(coordination_v1.Lease, "leases", namespaced=True),
    _info(apps_v1.Deployment, "deployments", namespaced=True, short_names=("deploy",),
          subresources=("status", "scale")),
    _info(apps_v1.ReplicaSet, "replicasets", namespaced=True, short_names=("rs",),
          subresources=("status", "scale")),
    _info(policy_v1.PodDisruptionBudget, "poddisruptionbudgets", namespaced=True,
          short_names=("pdb",), subresources=("status",)),
    _info(scheduling_v1.PriorityClass, "priorityclasses", namespaced=False, short_names=("pc",)),
    _info(rbac_v1.ClusterRole, "clusterroles", namespaced=False),
    _info(rbac_v1.ClusterRoleBinding, "clusterrolebindings", namespaced=False),
    _info(rbac_v1.Role, "roles", namespaced=True),
    _info(rbac_v1.RoleBinding, "rolebindings", namespaced=True),
    _info(resource_v1.DeviceClass, "deviceclasses", namespaced=False),
    _info(resource_v1.ResourceSlice, "resourceslices", namespaced=False),
    _info(resource_v1.ResourceClaim, "resourceclaims", namespaced=True, subresources=("status",)),
    _info(resource_v1.ResourceClaimTemplate, "resourceclaimtemplates", namespaced=True),
)  # fmt: skip

_BY_PLURAL = {r.plural: r for r in RESOURCES}
_BY_KIND = {r.kind: r for r in RESOURCES}
_BY_API_VERSION_KIND = {(r.api_version, r.kind): r for r in RESOURCES}
_BY_TYPE = {r.type: r for r in RESOURCES}
# Every name `resolve` accepts, lower-cased: plural, singular, kind and short names.
_BY_ANY_NAME = {
    name: r for r in RESOURCES for name in (r.plural, r.singular, r.kind.lower(), *r.short_names)
}


def by_plural(plural: str) -> ResourceInfo:
    """The resource served at `.../<plural>` (as in a URL path)."""
    try:
        return _BY_PLURAL[plural]
    except KeyError:
        raise NotFound(f'the server could not find the requested resource "{plural}"') from None


def by_kind(kind: str) -> ResourceInfo:
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise NotFound(f'no matches for kind "{kind}"') from None


def by_api_version_kind(api_version: str, kind: str) -> ResourceInfo:
    """The resource an object's `apiVersion` and `kind` name (e.g. a YAML document)."""
    try:
        return _BY_API_VERSION_KIND[(api_version, kind)]
    except KeyError:
        raise NotFound(f'no matches for kind "{kind}" in version "{api_version}"') from None


def by_type(type_: type[KubeObject]) -> ResourceInfo:
    """The resource whose objects decode into `type_`."""
    try:
        return _BY_TYPE[type_]
    except KeyError:
        raise NotFound(f"no resource is served for type {type_.__name__}") from None


def resolve(name: str) -> ResourceInfo:
    """A resource from a user-typed name, as kubectl accepts it.

    Accepts the plural, singular, kind (any case) or short name (`po`, `deploy`), optionally
    qualified by group (`resourceclaims.resource.k8s.io`).
    """
    key = name.lower()
    info = _BY_ANY_NAME.get(key)
    if info is None and "." in key:
        resource, _, group = key.partition(".")
        candidate = _BY_ANY_NAME.get(resource)
        if candidate is not None and candidate.group == group:
            info = candidate
    if info is None:
        raise NotFound(f'the server doesn\'t have a resource type "{name}"')
    return info
