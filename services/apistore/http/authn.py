"""Who a request is (static bearer tokens, impersonation) and what it may do.

As kube-apiserver's `--token-auth-file`: a CSV file, one user a line,
`token,user,uid[,"group1,group2"]`. Every authenticated user is also in
`system:authenticated`. The user is the request's actor (recorded with each write), never
a header or a query parameter the client chooses.

Authorization is RBAC (`drasim.apistore.rbac`): `system:masters` may do everything (and
impersonate, `kubectl --as`); any other user what the Roles bound to it or its groups allow.
Upstream's default bindings let every authenticated user read discovery and OpenAPI and
ask who it is (`kubectl auth whoami`) and what it may do (`kubectl auth can-i`). A refusal
is upstream's 403 message.
"""

from __future__ import annotations

import csv
import hmac
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from drasim.apistore import rbac
from drasim.common import errors

MASTERS = rbac.SYSTEM_PRIVILEGED_GROUP
AUTHENTICATED = "system:authenticated"
ADMIN_USER = "kubernetes-admin"  # whom a single cluster token names (kubeadm's admin)
IMPERSONATE_USER = "Impersonate-User"
IMPERSONATE_GROUP = "Impersonate-Group"
IMPERSONATE_UID = "Impersonate-Uid"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = field(default_factory=tuple)

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


def authenticate(request: web.Request, tokens: Tokens) -> UserInfo:
    """The request's user (impersonated, if its user may), or 401."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    user = tokens.authenticate(token.strip()) if scheme.lower() == "bearer" else None
    if user is None:
        raise errors.Unauthorized("Unauthorized")
    as_user = request.headers.get(IMPERSONATE_USER, "")
    as_groups = tuple(request.headers.getall(IMPERSONATE_GROUP, ()))
    if not as_user:
        if as_groups:
            raise errors.InternalError(
                "requested [" + ", ".join(f"{{Group {g}}}" for g in as_groups) + "] without "
                "impersonating a user"
            )
        return user
    if not user.is_master:
        raise errors.forbidden(
            "users",
            as_user,
            f'User "{user.name}" cannot impersonate resource "users" in API group "" at the '
            "cluster scope",
        )
    return UserInfo(as_user, request.headers.get(IMPERSONATE_UID, ""), (*as_groups, AUTHENTICATED))


# What any user may ask about itself (RBAC's system:basic-user).
SELF_SUBJECT_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
SELF_SUBJECT_ACCESS_REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def authorize(request: web.Request, user: UserInfo, policy: rbac.Policy) -> None:
    """403 unless RBAC allows the request; `system:masters` may do everything (as
    kube-apiserver's privileged-group authorizer, ahead of RBAC)."""
    if user.is_master:
        return
    attrs = attributes(request)
    if not policy.authorize(user.name, user.groups, attrs).allowed:
        raise _refusal(attrs, user)


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


def _refusal(attrs: rbac.Attributes, user: UserInfo) -> errors.Forbidden:
    """The RBAC authorizer's 403, phrased as upstream's for a resource request (its verb,
    resource, group and scope) or for any other path."""
    if not attrs.resource_request:
        return errors.Forbidden(
            f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
        )
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    what = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    full = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    return errors.Forbidden(
        f'{what} is forbidden: User "{user.name}" cannot {attrs.verb} resource "{full}" in API '
        f'group "{attrs.group}" {scope}'
    )
