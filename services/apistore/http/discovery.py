"""Discovery: `/version`, `/api`, `/apis` and per group-version resource lists.

Built once from the registry (per `--runtime-config`: the versions served besides the
stored ones), so a kind added there is discovered with no change here.
kubectl 1.32 first asks `/api` and `/apis` for aggregated discovery (apidiscovery.k8s.io/v2,
every group, version and resource in one answer) and falls back to the legacy documents.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from typing import Any

import msgspec
from aiohttp import web

from drasim.apistore.http import keys, negotiation, options
from drasim.common.api import registry
from drasim.common.runtime_config import RuntimeConfig

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "scale": ["get", "patch", "update"],
                     "binding": ["create"], "log": ["get"], "eviction": ["create"]}  # fmt: skip
# The kind a subresource answers with, when it is not the parent's (group, version, kind).
SUBRESOURCE_KINDS = {"scale": ("autoscaling", "v1", "Scale"), "binding": ("", "v1", "Binding"),
                     "eviction": ("policy", "v1", "Eviction")}  # fmt: skip
# `kubectl get all` lists the resources in the `all` category; `api-extensions` holds the
# kinds that extend the API, as upstream's storages declare them.
CATEGORIES = {
    **{plural: ["all"] for plural in ("pods", "services", "deployments", "replicasets",
                                      "daemonsets", "statefulsets", "jobs", "cronjobs")},
    **{plural: ["api-extensions"] for plural in ("customresourcedefinitions",
                                                 "validatingadmissionpolicies",
                                                 "validatingadmissionpolicybindings")},
}  # fmt: skip
# Namespaces are deleted one by one (upstream's namespace storage has no DeleteCollection:
# deleting them all at once is too easy a mistake).
WITHOUT_DELETECOLLECTION = frozenset({"namespaces"})

_encoder = msgspec.json.Encoder()


@dataclasses.dataclass(frozen=True)
class Review:
    """A review kind: created to be answered, never stored (so not in the registry)."""

    group: str
    version: str
    plural: str
    kind: str


# The reviews `reviews.py` answers, which kubectl finds through discovery before it asks
# (`kubectl auth can-i create selfsubjectaccessreviews` resolves the name here).
REVIEWS = (
    Review("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview"),
    Review("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    Review("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
)


@dataclasses.dataclass(frozen=True)
class Served:
    """A resource as one group-version serves it: the stored version, or another."""

    info: registry.ResourceInfo
    version: str

    @property
    def group(self) -> str:
        return self.info.group


def served(config: RuntimeConfig) -> list[Served]:
    """Every resource in every version `config` serves it in."""
    out = []
    for info in registry.RESOURCES:
        if config.serves(info.group, info.version, info.plural):
            out.append(Served(info, info.version))
        out.extend(Served(info, v.version) for v in config.served_versions(info))
    return out


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' version order (upstream `CompareKubeAwareVersionStrings`): GA before
    beta before alpha, higher numbers first, other names last; sort by this key."""
    match = re.fullmatch(r"v([0-9]+)(?:(beta|alpha)([0-9]+))?", version)
    if match is None:
        return (3, 0, 0, version)
    rank = {None: 0, "beta": 1, "alpha": 2}[match.group(2)]
    return (rank, -int(match.group(1)), -int(match.group(3) or 0), "")


def _ordered(pairs: set[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(pairs, key=lambda gv: (gv[0], version_priority(gv[1])))


@functools.cache
def group_versions(config: RuntimeConfig) -> list[tuple[str, str]]:
    """Every served (group, version) of a stored kind, the core group first, each group's
    versions in priority order."""
    return _ordered({(s.group, s.version) for s in served(config)})


@functools.cache
def discovered_group_versions(config: RuntimeConfig) -> list[tuple[str, str]]:
    """What discovery lists: the stored kinds' group-versions and the reviews'."""
    return _ordered({*group_versions(config), *((r.group, r.version) for r in REVIEWS)})


def _resources(config: RuntimeConfig, group: str, version: str) -> list[registry.ResourceInfo]:
    return [s.info for s in served(config) if (s.group, s.version) == (group, version)]


def _reviews(group: str, version: str) -> list[Review]:
    return [r for r in REVIEWS if (r.group, r.version) == (group, version)]


def _subresources(info: registry.ResourceInfo) -> list[str]:
    return [s for s in info.subresources if s in options.SUBRESOURCES]


def subresource_kind(info: registry.ResourceInfo, sub: str, version: str) -> tuple[str, str, str]:
    """(group, version, kind) a subresource of the resource served in `version` answers
    with."""
    return SUBRESOURCE_KINDS.get(sub, (info.group, version, info.kind))


def verbs(info: registry.ResourceInfo) -> list[str]:
    """The verbs discovery lists for the resource, which its collection answers."""
    if info.plural in WITHOUT_DELETECOLLECTION:
        return [v for v in VERBS if v != "deletecollection"]
    return VERBS


def _categories(info: registry.ResourceInfo) -> list[str]:
    return CATEGORIES.get(info.plural) or list(info.categories)


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


# -- legacy discovery -------------------------------------------------------------------


@functools.cache
def resource_list(config: RuntimeConfig, group: str, version: str) -> bytes:
    """`metav1.APIResourceList` of one group-version, subresources as `pods/status`."""
    resources: list[dict[str, Any]] = []
    for info in _resources(config, group, version):
        resources.append(
            {
                "name": info.plural,
                "singularName": info.singular,
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": verbs(info),
                **({"shortNames": list(info.short_names)} if info.short_names else {}),
                **({"categories": _categories(info)} if _categories(info) else {}),
            }
        )
        for sub in _subresources(info):
            sub_group, sub_version, sub_kind = subresource_kind(info, sub, version)
            # Only a subresource answering in another group-version names it, as upstream's.
            other = (sub_group, sub_version) != (group, version)
            resources.append(
                {
                    "name": f"{info.plural}/{sub}",
                    "singularName": "",
                    "namespaced": info.namespaced,
                    **({"group": sub_group, "version": sub_version} if other else {}),
                    "kind": sub_kind,
                    "verbs": SUBRESOURCE_VERBS[sub],
                }
            )
    for review in _reviews(group, version):
        resources.append(
            {
                "name": review.plural,
                "singularName": review.plural.removesuffix("s"),
                "namespaced": False,
                "kind": review.kind,
                "verbs": ["create"],
            }
        )
    return _encoder.encode(
        {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": _group_version(group, version),
            "resources": resources,
        }
    )


def _api_group(config: RuntimeConfig, group: str) -> dict[str, Any]:
    """A group's versions in priority order; the first is the preferred one."""
    versions = [
        {"groupVersion": _group_version(group, v), "version": v}
        for g, v in discovered_group_versions(config)
        if g == group
    ]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


@functools.cache
def group_list(config: RuntimeConfig) -> bytes:
    groups = sorted({g for g, _ in discovered_group_versions(config) if g})
    return _encoder.encode(
        {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_api_group(config, g) for g in groups],
        }
    )


# -- aggregated discovery (apidiscovery.k8s.io/v2) ----------------------------------------


def _discovery_resource(info: registry.ResourceInfo, version: str) -> dict[str, Any]:
    subresources = []
    for sub in _subresources(info):
        sub_group, sub_version, sub_kind = subresource_kind(info, sub, version)
        subresources.append(
            {
                "subresource": sub,
                "responseKind": {"group": sub_group, "version": sub_version, "kind": sub_kind},
                "verbs": SUBRESOURCE_VERBS[sub],
            }
        )
    return {
        "resource": info.plural,
        "responseKind": {"group": info.group, "version": version, "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": verbs(info),
        **({"shortNames": list(info.short_names)} if info.short_names else {}),
        **({"categories": _categories(info)} if _categories(info) else {}),
        **({"subresources": subresources} if subresources else {}),
    }


def _discovery_review(review: Review) -> dict[str, Any]:
    return {
        "resource": review.plural,
        "responseKind": {"group": review.group, "version": review.version, "kind": review.kind},
        "scope": "Cluster",
        "singularResource": review.plural.removesuffix("s"),
        "verbs": ["create"],
    }


@functools.cache
def aggregated(config: RuntimeConfig, *, core: bool) -> bytes:
    """`APIGroupDiscoveryList` of the core group (`/api`) or of all named groups (`/apis`)."""
    items = []
    pairs_by_group = itertools.groupby(discovered_group_versions(config), key=lambda gv: gv[0])
    for group, pairs in pairs_by_group:
        if (group == "") != core:
            continue
        versions = [
            {
                "version": version,
                "resources": [
                    _discovery_resource(r, version) for r in _resources(config, group, version)
                ]
                + [_discovery_review(r) for r in _reviews(group, version)],
                "freshness": "Current",
            }
            for _, version in pairs
        ]
        items.append({"metadata": {"name": group}, "versions": versions})
    return _encoder.encode(
        {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        }
    )


# -- handlers -----------------------------------------------------------------------------


def _json(body: bytes) -> web.Response:
    return web.Response(body=body, content_type=negotiation.JSON)


def _aggregated_or(request: web.Request, *, core: bool, legacy: bytes) -> web.Response:
    if negotiation.wants(request, negotiation.AGGREGATED_DISCOVERY):
        return web.Response(
            body=aggregated(request.app[keys.RUNTIME_CONFIG], core=core),
            headers={"Content-Type": negotiation.AGGREGATED_DISCOVERY.content_type},
        )
    return _json(legacy)


async def version(request: web.Request) -> web.Response:
    """`/version`: the binary's release and the one it emulates (`drasim.common.version`)."""
    return _json(_encoder.encode(request.app[keys.VERSION].info()))


async def core_versions(request: web.Request) -> web.Response:
    """`/api`: the core group's versions."""
    legacy = _encoder.encode(
        {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}
            ],
        }
    )
    return _aggregated_or(request, core=True, legacy=legacy)


async def groups(request: web.Request) -> web.Response:
    """`/apis`: every named group."""
    return _aggregated_or(request, core=False, legacy=group_list(request.app[keys.RUNTIME_CONFIG]))


async def group(request: web.Request) -> web.Response:
    """`/apis/<group>`: one group's versions."""
    name = request.match_info["group"]
    config = request.app[keys.RUNTIME_CONFIG]
    if not any(g == name for g, _ in discovered_group_versions(config)):
        raise options.not_found()
    body = {"kind": "APIGroup", "apiVersion": "v1", **_api_group(config, name)}
    return _json(_encoder.encode(body))


async def resources(request: web.Request) -> web.Response:
    """`/api/v1` and `/apis/<group>/<version>`: one group-version's resources."""
    key = (request.match_info.get("group", ""), request.match_info["version"])
    config = request.app[keys.RUNTIME_CONFIG]
    if key not in discovered_group_versions(config):
        raise options.not_found()
    return _json(resource_list(config, *key))


def _forget() -> None:
    """Custom resources came or went: what was built from the registry is stale."""
    for cached in (
        group_versions,
        discovered_group_versions,
        resource_list,
        group_list,
        aggregated,
    ):
        cached.cache_clear()


registry.on_change(_forget)
