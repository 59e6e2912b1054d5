"""What a request asks for: the resource its path names and the options its query carries.

Paths follow Kubernetes' request-info rules: `/api/v1/...` or `/apis/<group>/<version>/...`,
then `[namespaces/<ns>/]<plural>[/<name>[/<subresource>]]`, except that
`namespaces/<name>/status` is the namespace's own subresource.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from aiohttp import web
from multidict import MultiMapping

from drasim.apistore.http import keys, protobuf
from drasim.apistore.request import Context
from drasim.common import codec, errors, tracing
from drasim.common.api import registry
from drasim.common.errors import field_forbidden, field_invalid, field_required, field_too_long

# Subresources served over HTTP (of those the registry lists, pods/ephemeralcontainers is not).
SUBRESOURCES = frozenset({"status", "scale", "binding", "log", "eviction"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
FIELD_VALIDATION = ("Ignore", "Warn", "Strict")
INCLUDE_OBJECT = ("None", "Metadata", "Object")
# Go's strconv.ParseBool, which Kubernetes uses for query flags (the Python client sends True).
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})


@dataclass(frozen=True, slots=True)
class Target:
    """The resource a path names; `name` is "" for a collection. `served` is the version
    the path names when it is not the stored one (bodies and answers are converted)."""

    info: registry.ResourceInfo
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    served: registry.ServedVersion | None = None

    @property
    def api_version(self) -> str:
        """The `apiVersion` of the objects the request sends and gets."""
        return self.served.api_version if self.served else self.info.api_version

    @property
    def version(self) -> str:
        return self.served.version if self.served else self.info.version


def not_found() -> errors.NotFound:
    return errors.NotFound("the server could not find the requested resource")


def target(request: web.Request) -> Target:
    """The served resource, namespace, name and subresource the URL path names, or 404."""
    group = request.match_info.get("group", "")
    version = request.match_info["version"]
    parts = request.match_info["path"].strip("/").split("/")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    if len(parts) > 3 or not all(parts):
        raise not_found()
    plural, name, subresource = (*parts, "", "")[:3]
    try:
        info = registry.by_plural(plural)
    except errors.NotFound:
        raise not_found() from None
    if not request.app[keys.RUNTIME_CONFIG].serves(group, version, plural):
        raise not_found()
    if info.plural == "namespaces":
        namespace = ""
    if namespace and not info.namespaced:
        raise not_found()
    if subresource and (subresource not in SUBRESOURCES or subresource not in info.subresources):
        raise not_found()
    found = Target(info, namespace, name, subresource, info.served(version))
    request[keys.TARGET] = found
    return found


def context(request: web.Request) -> Context:
    """Who asks: the authenticated (or impersonated) user, recorded with every write in the
    event log, with its groups (by which RBAC writes are checked for escalation); never a
    header or a field manager the client picks (a field manager given must still be
    printable, as upstream checks). The trace is the request's server span (tracing on),
    else its `traceparent` header, else a new one."""
    field_manager = request.query.get("fieldManager", "")
    if field_manager and request.method in _WRITE_OPTIONS:
        _check_field_manager(field_manager, _WRITE_OPTIONS[request.method])
    user = request[keys.USER]
    traceparent = (
        tracing.current_traceparent()
        or request.headers.get(tracing.TRACEPARENT, "")
        or tracing.mint()
    )
    return Context(actor=user.name, traceparent=traceparent, groups=user.groups, extra=user.extra)


# The options kind each writing method's query is (and whose fieldManager is checked).
_WRITE_OPTIONS = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}


def _check_field_manager(field_manager: str, kind: str) -> None:
    """422 for a field manager with a character that is not printable, as upstream's
    `ValidateFieldManager` (it is the actor the event log records, whose text holds no NUL)."""
    for index, char in enumerate(field_manager):
        if not char.isprintable():
            at = len(field_manager[:index].encode())  # Go ranges over a string's bytes
            cause = errors.field_invalid(
                "fieldManager",
                field_manager,
                f"invalid character U+{ord(char):04X} (at position {at})",
            )
            raise invalid_parameters(kind, "meta.k8s.io", [cause])


# -- query parameters -------------------------------------------------------------------


def flag(query: MultiMapping[str], name: str) -> bool:
    value = query.get(name, "")
    if value in _TRUE:
        return True
    if value in _FALSE or value == "":
        return False
    raise errors.BadRequest(f"invalid value {value!r} for {name}: want true or false")


def integer(query: MultiMapping[str], name: str) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.BadRequest(f"invalid value {value!r} for {name}: want an integer") from None


def dry_run(values: list[str]) -> bool:
    """`dryRun=All` runs every check and writes nothing; no other value exists."""
    for value in values:
        if value != "All":
            raise errors.BadRequest(f'invalid dry run value "{value}": only "All" is supported')
    return bool(values)


FIELD_MANAGER_MAX_LENGTH = 128


def validate_write_options(query: MultiMapping[str], kind: str, *, apply: bool = False) -> None:
    """Upstream's `ValidateCreateOptions` / `ValidateUpdateOptions` / `ValidatePatchOptions`
    checks of `fieldManager` and `force`, before anything is read or written; `kind` is the
    options' kind (`CreateOptions`, `UpdateOptions`, `PatchOptions`)."""
    manager = query.get("fieldManager", "")
    errs = []
    if kind == "PatchOptions":
        if not apply and "force" in query:
            errs.append(field_forbidden("force", "may not be specified for non-apply patch"))
        if apply and not manager:
            # Defaulted to "kubectl" by kubectl, but every controller must set its own.
            errs.append(field_required("fieldManager", "is required for apply patch"))
    if len(manager.encode()) > FIELD_MANAGER_MAX_LENGTH:
        errs.append(field_too_long("fieldManager", FIELD_MANAGER_MAX_LENGTH))
    for i, ch in enumerate(manager):
        if not ch.isprintable():
            position = len(manager[:i].encode())
            errs.append(
                field_invalid(
                    "fieldManager",
                    manager,
                    f"invalid character U+{ord(ch):04X} (at position {position})",
                )
            )
    if errs:
        raise invalid_parameters(kind, "meta.k8s.io", errs)


def invalid_parameters(kind: str, group: str, errs: list[errors.FieldError]) -> errors.Invalid:
    """The 422 upstream answers for bad request parameters: `errors.NewInvalid` with an empty
    name, e.g. `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: ...`
    (the options' kind) or `pods "" is invalid: resourceVersion: ...` (a watch's resource)."""
    return errors.invalid(kind, "", errs, group=group, keep_empty_name=True)


def field_validation(query: MultiMapping[str]) -> str:
    """Strict, Warn (Kubernetes' default) or Ignore: what unknown fields in a body cause."""
    value = query.get("fieldValidation") or "Warn"
    if value not in FIELD_VALIDATION:
        raise errors.BadRequest(
            f"fieldValidation parameter unsupported: {value!r} (want one of "
            f"{', '.join(FIELD_VALIDATION)})"
        )
    return value


def include_object(query: MultiMapping[str]) -> str:
    """What each Table row carries: nothing, the object's metadata (default) or the object."""
    value = query.get("includeObject") or "Metadata"
    if value not in INCLUDE_OBJECT:
        raise errors.BadRequest(
            f"includeObject {value!r} is not one of {', '.join(INCLUDE_OBJECT)}"
        )
    return value


@dataclass(frozen=True, slots=True)
class ListOptions:
    """`metav1.ListOptions` as list and watch read them."""

    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""
    timeout_seconds: int | None = None
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None  # None: not given

    @classmethod
    def from_query(cls, query: MultiMapping[str]) -> ListOptions:
        return cls(
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""),
            limit=max(integer(query, "limit") or 0, 0),
            continue_token=query.get("continue", ""),
            resource_version=query.get("resourceVersion", ""),
            resource_version_match=query.get("resourceVersionMatch", ""),
            timeout_seconds=integer(query, "timeoutSeconds"),
            allow_watch_bookmarks=flag(query, "allowWatchBookmarks"),
            send_initial_events=(
                flag(query, "sendInitialEvents") if "sendInitialEvents" in query else None
            ),
        )


class Preconditions(msgspec.Struct, kw_only=True, rename="camel"):
    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(msgspec.Struct, kw_only=True, rename="camel"):
    """`metav1.DeleteOptions`, the body of a DELETE (its fields may also come as query)."""

    kind: str = ""
    api_version: str = ""
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    preconditions: Preconditions | None = None
    dry_run: list[str] = []

    def policy(self) -> str:
        """The propagation policy; the deprecated `orphanDependents` maps onto it."""
        if self.propagation_policy:
            return self.propagation_policy
        if self.orphan_dependents is not None:
            return "Orphan" if self.orphan_dependents else "Background"
        return ""


def delete_options(
    body: bytes, query: MultiMapping[str], media_type: str = "application/json"
) -> DeleteOptions:
    """DeleteOptions from the body (kubectl, client libraries; JSON, or protobuf from
    kubectl's typed clients) overlaid by the query."""
    try:
        if not body.strip():
            opts = DeleteOptions()
        elif media_type == protobuf.MEDIA_TYPE:
            opts = msgspec.convert(protobuf.decode_body(body), DeleteOptions)
        else:
            # Through builtins: codec bounds the depth (msgspec skips unknown fields by
            # recursion, so a deep one would be a RecursionError).
            opts = msgspec.convert(codec.load_json(body), DeleteOptions)
    except (msgspec.DecodeError, msgspec.ValidationError, codec.DecodeLimitError) as exc:
        raise errors.BadRequest(f"invalid DeleteOptions: {exc}") from exc
    grace = integer(query, "gracePeriodSeconds")
    return msgspec.structs.replace(
        opts,
        grace_period_seconds=opts.grace_period_seconds if grace is None else grace,
        propagation_policy=query.get("propagationPolicy") or opts.propagation_policy,
        orphan_dependents=(
            flag(query, "orphanDependents")
            if "orphanDependents" in query
            else opts.orphan_dependents
        ),
        dry_run=[*opts.dry_run, *query.getall("dryRun", [])],
    )
