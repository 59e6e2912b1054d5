"""The reviews a user asks about itself: `kubectl auth whoami` and `kubectl auth can-i`."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from drasim.apistore.http import authn, keys
from drasim.apistore.mutations import now_rfc3339


def _user_json(user: authn.UserInfo) -> dict[str, Any]:
    info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    return info


async def self_subject_review(request: web.Request) -> web.Response:
    """`kubectl auth whoami`: the request's own user, as authenticated (the body carries
    nothing to read; kubectl sends it as protobuf)."""
    review = {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": now_rfc3339()},
        "status": {"userInfo": _user_json(request[keys.USER])},
    }
    return _json(review)


def _json(body: dict[str, Any]) -> web.Response:
    return web.Response(body=msgspec.json.encode(body), status=201, content_type="application/json")


async def self_subject_access_review(request: web.Request) -> web.Response:
    """`kubectl auth can-i`: whether the user may, by the rules of `authorize` (masters
    may do everything; others nothing beyond discovery, so the attributes asked about do
    not change the answer)."""
    user = request[keys.USER]
    status: dict[str, Any] = {"allowed": user.is_master}
    if user.is_master:
        status["reason"] = f'allowed by the "{authn.MASTERS}" group'
    review = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": now_rfc3339()},
        "spec": {},
        "status": status,
    }
    return _json(review)
