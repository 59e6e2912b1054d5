"""Every served resource in one table: names, group/version, scope, type, subresources.

The HTTP routes, the store, the CLI (`drasim get po`) and the bus subjects all look kinds
up here, so a kind is added in exactly one place. A kind is stored in one version (its
type's `API_VERSION`) and may also be served in others (`versions`, each with the module
converting it, `drasim.common.api.conversion`), when `--runtime-config` turns them on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from drasim.common import version
from drasim.common.api import (
    admissionregistration_v1,
    apiextensions_v1,
    apps_v1,
    batch_v1,
    coordination_v1,
    core_v1,
    core_v1_app,
    discovery_v1,
    networking_v1,
    policy_v1,
    rbac_v1,
    resource_v1,
    scheduling_v1,
)
from drasim.common.api.conversion import Conversion
from drasim.common.api.conversion import resource_v1beta1 as resource_v1beta1_conversion
from drasim.common.api.conversion import resource_v1beta2 as resource_v1beta2_conversion
from drasim.common.api.meta_v1 import KubeObject
from drasim.common.errors import NotFound

__all__ = [
    "RESOURCES",
    "ResourceInfo",
    "ServedVersion",
    "on_change",
    "register",
    "unregister",
    "by_api_version_kind",
    "by_kind",
    "by_plural",
    "by_type",
    "resolve",
]


@dataclass(frozen=True, slots=True)
class ServedVersion:
    """A version a kind is served in besides the one it is stored in: its bodies' type,
    and the conversion to and from the stored version."""

    group: str
    version: str
    kind: str
    type: type[KubeObject]
    conversion: Conversion

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def to_storage(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A body in this version as the stored version's builtins."""
        return self.conversion.to_storage(self.kind, obj)

    def from_storage(self, data: bytes) -> bytes:
        """A stored object's JSON as this version's."""
        obj = msgspec.json.decode(data)
        return msgspec.json.encode(self.conversion.from_storage(self.kind, obj))

    def deprecation_warning(self) -> str:
        """What upstream's handlers warn on every request in a version deprecated by this
        release (`deprecation.WarningMessage`, k8s.io/apiserver/pkg/endpoints/deprecation,
        which compares with the binary's release, not the emulated one); "" if it is not."""
        deprecated, removed = self.conversion.LIFECYCLE[self.kind]
        if deprecated > version.BINARY:
            return ""
        return (
            f"{self.api_version} {self.kind} is deprecated in v{deprecated}+, "
            f"unavailable in v{removed}+"
        )


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
    versions: tuple[ServedVersion, ...] = ()  # besides `version`, newest first
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """`v1` for the core group, else `group/version`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def kind_and_group(self) -> str:
        """How kubectl names the kind in `-o name` and its apply and delete messages: the
        lowercased kind and the group (`deviceclass.resource.k8s.io`, `job.batch`), the kind
        alone in the core group (`pod`)."""
        kind = self.kind.lower()
        return f"{kind}.{self.group}" if self.group else kind

    def served(self, version: str) -> ServedVersion | None:
        """The other version `version` names, None for the stored one or one not served."""
        return next((v for v in self.versions if v.version == version), None)


def _info(
    type_: type[KubeObject],
    plural: str,
    *,
    namespaced: bool,
    short_names: tuple[str, ...] = (),
    subresources: tuple[str, ...] = (),
    versions: tuple[Conversion, ...] = (),
) -> ResourceInfo:
    group, _, version = type_.API_VERSION.rpartition("/")
    served = tuple(
        ServedVersion(
            group=group,
            version=conversion.GROUP_VERSION.rpartition("/")[2],
            kind=type_.KIND,
            type=conversion.TYPES.get(type_.KIND, type_),
            conversion=conversion,
        )
        for conversion in versions
    )
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
        versions=served,
    )


# resource.k8s.io's kinds are also served in the versions before v1, as upstream 1.37 can.
_RESOURCE_BETAS = (resource_v1beta2_conversion, resource_v1beta1_conversion)


RESOURCES: tuple[ResourceInfo, ...] = (
    _info(core_v1.Namespace, "namespaces", namespaced=False, short_names=("ns",),
          subresources=("status",)),
    _info(core_v1.Node, "nodes", namespaced=False, short_names=("no",), subresources=("status",)),
    _info(core_v1.Pod, "pods", namespaced=True, short_names=("po",),
          subresources=("status", "binding", "log", "eviction", "ephemeralcontainers")),
    _info(core_v1.Event, "events", namespaced=True, short_names=("ev",)),
    _info(core_v1.ResourceQuota, "resourcequotas", namespaced=True, short_names=("quota",),
          subresources=("status",)),
    _info(core_v1_app.ConfigMap, "configmaps", namespaced=True, short_names=("cm",)),
    _info(core_v1_app.Secret, "secrets", namespaced=True),
    _info(core_v1_app.ServiceAccount, "serviceaccounts", namespaced=True, short_names=("sa",)),
    _info(core_v1_app.Service, "services", namespaced=True, short_names=("svc",),
          subresources=("status",)),
    _info(core_v1_app.Endpoints, "endpoints", namespaced=True, short_names=("ep",)),
    _info(core_v1_app.PersistentVolumeClaim, "persistentvolumeclaims", namespaced=True,
          short_names=("pvc",), subresources=("status",)),
    _info(discovery_v1.EndpointSlice, "endpointslices", namespaced=True),
    _info(networking_v1.IPAddress, "ipaddresses", namespaced=False, short_names=("ip",)),
    _info(apiextensions_v1.CustomResourceDefinition, "customresourcedefinitions",
          namespaced=False, short_names=("crd", "crds"), subresources=("status",)),
    _info(admissionregistration_v1.ValidatingAdmissionPolicy, "validatingadmissionpolicies",
          namespaced=False, subresources=("status",)),
    _info(admissionregistration_v1.ValidatingAdmissionPolicyBinding,
          "validatingadmissionpolicybindings", namespaced=False),
    _info(coordination_v1.Lease, "leases", namespaced=True),
    _info(apps_v1.Deployment, "deployments", namespaced=True, short_names=("deploy",),
          subresources=("status", "scale")),
    _info(apps_v1.ReplicaSet, "replicasets", namespaced=True, short_names=("rs",),
          subresources=("status", "scale")),
    _info(apps_v1.DaemonSet, "daemonsets", namespaced=True, short_names=("ds",),
          subresources=("status",)),
    _info(apps_v1.StatefulSet, "statefulsets", namespaced=True, short_names=("sts",),
          subresources=("status", "scale")),
    _info(batch_v1.Job, "jobs", namespaced=True, subresources=("status",)),
    _info(batch_v1.CronJob, "cronjobs", namespaced=True, short_names=("cj",),
          subresources=("status",)),
    _info(policy_v1.PodDisruptionBudget, "poddisruptionbudgets", namespaced=True,
          short_names=("pdb",), subresources=("status",)),
    _info(scheduling_v1.PriorityClass, "priorityclasses", namespaced=False, short_names=("pc",)),
    _info(rbac_v1.ClusterRole, "clusterroles", namespaced=False),
    _info(rbac_v1.ClusterRoleBinding, "clusterrolebindings", namespaced=False),
    _info(rbac_v1.Role, "roles", namespaced=True),
    _info(rbac_v1.RoleBinding, "rolebindings", namespaced=True),
    _info(resource_v1.DeviceClass, "deviceclasses", namespaced=False, versions=_RESOURCE_BETAS),
    _info(resource_v1.ResourceSlice, "resourceslices", namespaced=False,
          versions=_RESOURCE_BETAS),
    _info(resource_v1.ResourceClaim, "resourceclaims", namespaced=True, subresources=("status",),
          versions=_RESOURCE_BETAS),
    _info(resource_v1.ResourceClaimTemplate, "resourceclaimtemplates", namespaced=True,
          versions=_RESOURCE_BETAS),
    _info(resource_v1.DeviceTaintRule, "devicetaintrules", namespaced=False,
          subresources=("status",), versions=(resource_v1beta2_conversion,)),
)  # fmt: skip

_BUILTIN = RESOURCES
_BY_PLURAL: dict[str, ResourceInfo] = {}
_BY_KIND: dict[str, ResourceInfo] = {}
_BY_API_VERSION_KIND: dict[tuple[str, str], ResourceInfo] = {}
_BY_TYPE: dict[type, ResourceInfo] = {}
# Every name `resolve` accepts, lower-cased: plural, singular, kind and short names.
_BY_ANY_NAME: dict[str, ResourceInfo] = {}
# Told when the served resources change (discovery and OpenAPI drop what they built).
_LISTENERS: list[Callable[[], None]] = []


def _index() -> None:
    for table in (_BY_PLURAL, _BY_KIND, _BY_API_VERSION_KIND, _BY_TYPE, _BY_ANY_NAME):
        table.clear()
    for r in RESOURCES:
        _BY_PLURAL[r.plural] = r
        _BY_KIND.setdefault(r.kind, r)
        _BY_API_VERSION_KIND[(r.api_version, r.kind)] = r
        _BY_TYPE[r.type] = r
        for name in (r.plural, r.singular, r.kind.lower(), *r.short_names):
            _BY_ANY_NAME.setdefault(name, r)
    for listener in _LISTENERS:
        listener()


_index()


def register(info: ResourceInfo) -> None:
    """Serve a kind made at run time (a custom resource) beside the built-in ones."""
    global RESOURCES
    RESOURCES = (*(r for r in RESOURCES if r.plural != info.plural), info)
    _index()


def unregister(plural: str) -> None:
    """Stop serving a kind `register` added; built-in kinds stay."""
    global RESOURCES
    if any(r.plural == plural for r in _BUILTIN):
        return
    RESOURCES = tuple(r for r in RESOURCES if r.plural != plural)
    _index()


def on_change(listener: Callable[[], None]) -> None:
    """Call `listener` whenever a kind is registered or unregistered."""
    _LISTENERS.append(listener)


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
