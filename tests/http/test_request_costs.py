"""Small requests that would cost far more than their size are refused before the work,
with upstream's codes and messages: JSON patch growth, huge quantities, YAML alias
expansion and deep nesting (issue #15, item 5). No timing: each case asserts the refusal,
which comes before the expensive step."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.builders import make_pod

PODS = "/api/v1/namespaces/default/pods"
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
YAML = {"Content-Type": "application/yaml"}


async def call(
    http: aiohttp.ClientSession, method: str, path: str, want: int, **kwargs: Any
) -> dict[str, Any]:
    async with http.request(method, path, **kwargs) as response:
        body = await response.json()
        assert response.status == want, body
        return body


def refusal(body: dict[str, Any]) -> tuple[int, str, str]:
    return body["code"], body["reason"], body["message"]


def pod(**limits: str) -> dict[str, Any]:
    return make_pod("p").limits(limits).dict()


async def test_json_patch_copies_are_bounded(http):
    """25 copies of the annotations into themselves: 2 KB asking for 2^25 times the map."""
    annotations = {f"k{i}": "v" * 60 for i in range(25)}
    await call(
        http,
        "POST",
        PODS,
        201,
        json={**pod(), "metadata": {"name": "p", "annotations": annotations}},
    )
    ops = [
        {"op": "copy", "from": "/metadata/annotations", "path": f"/metadata/annotations/c{i}"}
        for i in range(25)
    ]
    body = await call(http, "PATCH", f"{PODS}/p", 422, data=json.dumps(ops), headers=JSON_PATCH)
    assert refusal(body) == (
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
    [cause] = body["details"]["causes"]
    assert cause["message"].startswith(
        "Unable to complete the copy, the accumulated size increase of copy is "
    )
    assert cause["message"].endswith(", exceeding the limit 3145728")
    # Nothing was written.
    stored = await call(http, "GET", f"{PODS}/p", 200)
    assert stored["metadata"]["annotations"] == annotations


async def test_json_patch_operations_are_bounded(http):
    await call(http, "POST", PODS, 201, json=pod())
    ops = [{"op": "test", "path": "/metadata/name", "value": "p"}] * 10001
    body = await call(http, "PATCH", f"{PODS}/p", 413, data=json.dumps(ops), headers=JSON_PATCH)
    assert refusal(body) == (
        413,
        "RequestEntityTooLarge",
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, "
        "got 10001",
    )


@pytest.mark.parametrize(
    ("quantity", "detail"),
    [
        ("1e200000", "invalid quantity '1e200000': must be less than 1e1000"),
        ("1e2147483648", "invalid quantity '1e2147483648': unable to parse quantity's suffix"),
        (
            "1" * 1001,
            "invalid quantity '" + "1" * 60 + "...': unable to parse numeric part of quantity: "
            "more than 1000 digits",
        ),
    ],
    ids=["huge exponent", "exponent past int32", "too many digits"],
)
async def test_quantities_are_bounded(http, quantity: str, detail: str):
    body = await call(http, "POST", PODS, 422, json=pod(cpu=quantity))
    # As any quantity that does not parse (the map key found in the body).
    field = "spec.containers[0].resources.limits[cpu]"
    assert refusal(body) == (422, "Invalid", f'Pod "<generated>" is invalid: {field}: {detail}')


async def test_tiny_quantities_round_up_at_once(http):
    """Upstream rounds any value below 1n up to 1n when it parses it, however small its
    exponent; a pod's defaulting then rounds its resources up to a thousandth."""
    created = await call(http, "POST", PODS, 201, json=pod(cpu="1e-2147483647"))
    assert created["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1e-3"


def laughs(levels: int, fanout: int) -> str:
    """A pod whose annotation list is `levels` aliases deep, each `fanout` wide."""
    anchors = ['a0: &a0 ["lol"]'] + [
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fanout) + "]" for i in range(1, levels + 1)
    ]
    return "\n".join(
        [
            "apiVersion: v1",
            "kind: Pod",
            "metadata:",
            "  name: p",
            "  laughs:",
            *(f"    {line}" for line in anchors),
            "spec:",
            "  containers: [{name: c, image: i}]",
        ]
    )


async def test_yaml_alias_expansion_is_bounded(http):
    """The billion laughs: 9 levels of 9 aliases (387 million strings) in some 500 bytes."""
    body = await call(http, "POST", PODS, 400, data=laughs(9, 9), headers=YAML)
    assert refusal(body) == (
        400,
        "BadRequest",
        "the body of the request was not valid YAML: yaml: document contains excessive aliasing",
    )
    # go-yaml's ratio lets a modest expansion through (3 levels of 10).
    await call(http, "POST", PODS, 201, data=laughs(3, 10), headers=YAML)


@pytest.mark.parametrize(
    ("content_type", "data", "message"),
    [
        (
            "application/json",
            '{"metadata":' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}",
            "the body of the request was not valid JSON: "
            "invalid character '{' exceeded max depth of 100",
        ),
        (
            "application/json",
            '{"metadata":{"a":' + "[" * 150 + "]" * 150 + "}}",
            "the body of the request was not valid JSON: "
            "invalid character '[' exceeded max depth of 100",
        ),
        (
            "application/yaml",
            "metadata: {a: " + "[" * 100_000 + "]" * 100_000 + "}",
            "the body of the request was not valid YAML: yaml: exceeded max depth of 100",
        ),
        (
            "application/yaml",
            "metadata:\n" + "".join("  " * i + "a:\n" for i in range(1, 150)),
            "the body of the request was not valid YAML: yaml: exceeded max depth of 100",
        ),
    ],
    ids=["json 10^5 deep", "json past the limit", "yaml flow 10^5 deep", "yaml block"],
)
async def test_nesting_depth_is_bounded(http, content_type: str, data: str, message: str):
    body = await call(http, "POST", PODS, 400, data=data, headers={"Content-Type": content_type})
    assert refusal(body) == (400, "BadRequest", message)


async def test_nesting_depth_is_bounded_in_patches_and_delete_options(http):
    await call(http, "POST", PODS, 201, json=pod())
    deep = '{"metadata":' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}"
    merge = {"Content-Type": "application/merge-patch+json"}
    body = await call(http, "PATCH", f"{PODS}/p", 400, data=deep, headers=merge)
    assert refusal(body) == (
        400,
        "BadRequest",
        "the body of the request was not valid JSON: "
        "invalid character '{' exceeded max depth of 100",
    )
    body = await call(http, "DELETE", f"{PODS}/p", 400, data=deep)
    assert refusal(body) == (
        400,
        "BadRequest",
        "invalid DeleteOptions: invalid character '{' exceeded max depth of 100",
    )


async def test_bodies_within_the_depth_limit_are_served(http):
    """Opaque driver parameters are free-form JSON: nested to exactly the limit (93 levels
    under 7 of the claim), they pass every step behind the decoder, patches included."""
    parameters: Any = 1
    for _ in range(93):
        parameters = {"a": parameters}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {
            "devices": {
                "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}],
                "config": [{"opaque": {"driver": "gpu.example.com", "parameters": parameters}}],
            }
        },
    }
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    await call(http, "POST", f"{claims}?fieldValidation=Strict", 201, json=claim)
    merge = {"Content-Type": "application/merge-patch+json"}
    await call(
        http, "PATCH", f"{claims}/c", 200, json={"metadata": {"labels": {"a": "b"}}}, headers=merge
    )
    strategic = {"Content-Type": "application/strategic-merge-patch+json"}
    await call(http, "PATCH", f"{claims}/c", 200, json=claim, headers=strategic)
