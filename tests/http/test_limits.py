"""Size limits on the wire, as kube-apiserver answers them: a body over 3 MiB is 413, an
object etcd would not store is etcd's refusal passed on as a 500."""

from __future__ import annotations

import msgspec

from drasim.apistore import limits
from tests.builders import make_pod
from tests.http.test_api import PODS, call


def pod_body(name: str, arg_size: int, *, length: int = 0) -> bytes:
    """A pod's JSON with one container argument of `arg_size` bytes, padded with trailing
    whitespace to `length` bytes if given."""
    pod = make_pod(name).dict()
    pod["spec"]["containers"][0]["args"] = ["x" * arg_size]
    body = msgspec.json.encode(pod)
    return body + b" " * (length - len(body)) if length else body


JSON = {"Content-Type": "application/json"}


async def test_a_body_over_3_mib_is_413_request_entity_too_large(http):
    body = pod_body("huge", 100, length=limits.MAX_REQUEST_BODY_BYTES + 1)
    status, _ = await call(http, "POST", PODS, 413, data=body, headers=JSON)
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Request entity too large: limit is 3145728",
        "reason": "RequestEntityTooLarge",
        "code": 413,
    }


async def test_an_object_over_etcds_limit_is_refused_with_etcds_words(http):
    etcd_refusal = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "etcdserver: request is too large",
        "code": 500,
    }
    # A body of exactly the limit is read; the object in it is too large to store.
    body = pod_body("big", 2_000_000, length=limits.MAX_REQUEST_BODY_BYTES)
    status, _ = await call(http, "POST", PODS, 500, data=body, headers=JSON)
    assert status == etcd_refusal
    status, _ = await call(http, "POST", PODS, 500, data=pod_body("big", 1_600_000), headers=JSON)
    assert status == etcd_refusal
    await call(http, "GET", f"{PODS}/big", 404)

    created, _ = await call(http, "POST", PODS, 201, data=pod_body("big", 1_200_000), headers=JSON)
    got, _ = await call(http, "GET", f"{PODS}/big", 200)
    assert got["spec"]["containers"][0]["args"] == created["spec"]["containers"][0]["args"]
