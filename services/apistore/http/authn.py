"""Who a request is (static bearer tokens, impersonation) and what it may do.

As kube-apiserver's `--token-auth-file`: a CSV file, one user a line,
`token,user,uid[,"group1,group2"]`. Every authenticated user is also in
`system:authenticated`; a request without a bearer token is `system:anonymous` in
`system:unauthenticated`, as with kube-apiserver's default `--anonymous-auth`. The user is
the request's actor (recorded with each write), never a header or a query parameter the
client chooses.

Authorization is RBAC (`drasim.apistore.rbac`): `system:masters` may do everything; any
other user what the Roles bound to it or its groups allow. Upstream's default bindings let
every authenticated user read discovery and OpenAPI and ask who it is (`kubectl auth
whoami`) and what it may do (`kubectl auth can-i`), and everyone, anonymous too, read
`/version` and `/healthz`, `/livez`, `/readyz`. A refusal is upstream's 403 message.

Impersonation (`kubectl --as`, `--as-group`, `--as-uid`, `Impersonate-Extra-*`) is
upstream's filter (`apiserver/pkg/endpoints/filters/impersonation.go`): each thing asked
for must be allowed the verb `impersonate` on `users`, `groups` or `serviceaccounts` (core
group, by name; a service account's username names its namespace), `userextras/<key>` or
`uids` (group authentication.k8s.io); then the request is the impersonated user's.
"""

from __future__ import annotations

import csv
import hmac
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from drasim.apistore import node_authorizer, rbac
from drasim.common import errors, nats_auth
from drasim.common.api import registry
from drasim.common.api.validation import names
from drasim.common.bus import messages

MASTERS = rbac.SYSTEM_PRIVILEGED_GROUP
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
ADMIN_USER = "kubernetes-admin"  # whom a single cluster token names (kubeadm's admin)
IMPERSONATE_USER = "Impersonate-User"
IMPERSONATE_GROUP = "Impersonate-Group"
IMPERSONATE_UID = "Impersonate-Uid"
IMPERSONATE_EXTRA_PREFIX = "Impersonate-Extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = field(default_factory=tuple)
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def is_master(self) -> bool:
        return MASTERS in self.groups


class TokenFileError(ValueError):
    """A token file line is unusable; the message names the file and the line."""


class Tokens:
    """The users the HTTP API knows, by bearer token."""

    def __init__(self, users: dict[str, UserInfo]) -> None:
        if not users:
            raise ValueError("the HTTP API needs at least one bearer token")
        self.users = users

    @classmethod
    def single(cls, token: str) -> Tokens:
        """One token for the cluster's admin (what `drasim up`'s kubeconfig carries)."""
        return cls({token: UserInfo(ADMIN_USER, ADMIN_USER, (MASTERS, AUTHENTICATED))})

    @classmethod
    def from_file(cls, path: Path) -> Tokens:
        users: dict[str, UserInfo] = {}
        with path.open(newline="") as f:
            for number, row in enumerate(csv.reader(f), start=1):
                if not row or row[0].startswith("#"):
                    continue
                if len(row) < 3 or not row[0].strip() or not row[1].strip():
                    raise TokenFileError(
                        f'{path}:{number}: expected token,user,uid[,"group1,group2"]'
                    )
                token, name, uid = (cell.strip() for cell in row[:3])
                groups = [g.strip() for g in row[3].split(",") if g.strip()] if len(row) > 3 else []
                users[token] = UserInfo(name, uid, (*groups, AUTHENTICATED))
        return cls(users)

    def authenticate(self, token: str) -> UserInfo | None:
        found = None
        for known, user in self.users.items():  # compare each: no early exit on a match
            if hmac.compare_digest(known.encode(), token.encode()):
                found = user
        return found


# Whom a request without a bearer token is (kube-apiserver's `--anonymous-auth`, on by
# default): RBAC then lets it read what `system:public-info-viewer` grants.
ANONYMOUS_USER = UserInfo(ANONYMOUS, "", (UNAUTHENTICATED,))


def authenticate(request: web.Request, tokens: Tokens) -> UserInfo:
    """The request's user: the bearer token's, anonymous without one (as upstream's
    bearer-token authenticator, which ignores other schemes and an empty token), or 401
    for a token nobody has."""
    parts = request.headers.get("Authorization", "").strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return ANONYMOUS_USER
    user = tokens.authenticate(parts[1])
    if user is None:
        raise errors.Unauthorized("Unauthorized")
    return user


@dataclass(frozen=True, slots=True)
class _Asked:
    """One thing a request asks to impersonate (upstream's ObjectReference of it)."""

    kind: str  # ServiceAccount, User, Group, UserExtra or UID
    name: str
    namespace: str = ""
    key: str = ""  # a UserExtra's key

    def __str__(self) -> str:
        """Go's `%v` of the ObjectReference: Kind, Namespace, Name, UID, APIVersion,
        ResourceVersion, FieldPath."""
        api_version = "authentication.k8s.io/v1" if self.kind in ("UserExtra", "UID") else ""
        return f"{{{self.kind} {self.namespace} {self.name}  {api_version}  {self.key}}}"

    def attributes(self) -> rbac.Attributes:
        """What impersonating it takes: the verb `impersonate` on it."""
        resource, group, subresource = {
            "ServiceAccount": ("serviceaccounts", "", ""),
            "User": ("users", "", ""),
            "Group": ("groups", "", ""),
            "UserExtra": ("userextras", AUTHENTICATION_GROUP, self.key),
            "UID": ("uids", AUTHENTICATION_GROUP, ""),
        }[self.kind]
        return rbac.Attributes(
            "impersonate",
            namespace=self.namespace,
            group=group,
            resource=resource,
            subresource=subresource,
            name=self.name,
        )


def _service_account(username: str) -> tuple[str, str] | None:
    """Upstream `serviceaccount.SplitUsername`: (namespace, name) of a valid
    `system:serviceaccount:<namespace>:<name>`."""
    if not username.startswith(nats_auth.SERVICE_ACCOUNT_PREFIX):
        return None
    parts = username.removeprefix(nats_auth.SERVICE_ACCOUNT_PREFIX).split(":")
    if len(parts) != 2:
        return None
    namespace, name = parts
    if names.is_dns1123_label(namespace) or names.is_dns1123_subdomain(name):
        return None
    return namespace, name


def _asked(request: web.Request) -> list[_Asked]:
    """Upstream `buildImpersonationRequests`; 400 for groups, extras or a uid without a
    user."""
    headers = request.headers
    asked: list[_Asked] = []
    as_user = headers.get(IMPERSONATE_USER, "")
    if as_user:
        account = _service_account(as_user)
        if account is not None:
            asked.append(_Asked("ServiceAccount", account[1], namespace=account[0]))
        else:
            asked.append(_Asked("User", as_user))
    asked += [_Asked("Group", g) for g in headers.getall(IMPERSONATE_GROUP, ())]
    prefix = IMPERSONATE_EXTRA_PREFIX.lower()
    for header, value in headers.items():
        if header.lower().startswith(prefix):
            key = urllib.parse.unquote(header[len(prefix) :].lower())
            asked.append(_Asked("UserExtra", value, key=key))
    as_uid = headers.get(IMPERSONATE_UID, "")
    if as_uid:
        asked.append(_Asked("UID", as_uid))
    if asked and not as_user:
        raise errors.BadRequest(
            f"requested [{' '.join(str(a) for a in asked)}] without impersonating a user"
        )
    return asked


def impersonate(request: web.Request, user: UserInfo, policy: rbac.Policy) -> UserInfo:
    """The user the request impersonates (itself when it asks for none); 403 naming the
    first thing asked for that RBAC does not allow `user` to impersonate."""
    asked = _asked(request)
    if not asked:
        return user
    name, uid = "", ""
    groups: list[str] = []
    extra: dict[str, tuple[str, ...]] = {}
    groups_given = IMPERSONATE_GROUP in request.headers
    for thing in asked:
        attrs = thing.attributes()
        if not allowed(user, attrs, policy):
            raise rbac.refusal(attrs, user.name)
        match thing.kind:
            case "ServiceAccount":
                name = nats_auth.service_account(thing.namespace, thing.name)
                if not groups_given:
                    groups = ["system:serviceaccounts", f"system:serviceaccounts:{thing.namespace}"]
            case "User":
                name = thing.name
            case "Group":
                groups.append(thing.name)
            case "UserExtra":
                extra[thing.key] = (*extra.get(thing.key, ()), thing.name)
            case "UID":
                uid = thing.name
    # Every user but the anonymous one is authenticated, unless it asked to be neither.
    if name != ANONYMOUS:
        if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
    elif UNAUTHENTICATED not in groups:
        groups.append(UNAUTHENTICATED)
    return UserInfo(name, uid, tuple(groups), extra)


# What any user may ask about itself (RBAC's system:basic-user).
SELF_SUBJECT_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
SELF_SUBJECT_ACCESS_REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SELF_SUBJECT_RULES_REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"


def authorize(request: web.Request, user: UserInfo, policy: rbac.Policy) -> None:
    """403 unless RBAC allows the request; `system:masters` may do everything (as
    kube-apiserver's privileged-group authorizer, ahead of RBAC)."""
    if user.is_master:
        return
    attrs = attributes(request)
    if allowed(user, attrs, policy):
        return
    node = node_authorizer.node_of(user.name, user.groups)
    if node is not None and attrs.resource_request:
        # The Node authorizer's: lists and watches here, the rest where the object is read
        # or written (`ApiCore.handle`, NodeRestriction).
        if attrs.verb in ("list", "watch"):
            node_authorizer.authorize_list(
                node,
                registry.by_plural(attrs.resource),
                messages.List(
                    resource=attrs.resource,
                    namespace=attrs.namespace,
                    field_selector=request.query.get("fieldSelector", ""),
                ),
            )
        return
    raise rbac.refusal(attrs, user.name)


def allowed(user: UserInfo, attrs: rbac.Attributes, policy: rbac.Policy) -> bool:
    """Upstream's authorizer chain: `system:masters` first, then RBAC."""
    return user.is_master or policy.authorize(user.name, user.groups, attrs).allowed


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "GET": "get", "HEAD": "get"}
# A namespace's own subresources: `/api/v1/namespaces/<ns>/status` is the namespace's.
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


def attributes(request: web.Request) -> rbac.Attributes:
    """What the request does, as upstream's `RequestInfoFactory` reads a path: a resource
    request under `/api/v1` or `/apis/<group>/<version>`, else a non-resource one (the
    discovery documents themselves among them)."""
    path = request.path
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) > 2:
        group, rest = "", parts[2:]
    elif parts[0] == "apis" and len(parts) > 3:
        group, rest = parts[1], parts[3:]
    else:
        return rbac.Attributes(request.method.lower(), resource_request=False, path=path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = _VERBS.get(request.method, request.method.lower())
    if verb == "get" and not name:
        verb = "watch" if request.query.get("watch") in ("1", "true") else "list"
    elif verb == "delete" and not name:
        verb = "deletecollection"
    return rbac.Attributes(
        verb,
        namespace=namespace,
        group=group,
        resource=resource,
        subresource=subresource,
        name=name,
        path=path,
    )
