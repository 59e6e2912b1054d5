"""The patch formats kubectl and the clients send (`drasim.apistore.patches`), table-driven.

They sit with the HTTP tests because the HTTP API is what accepts them from outside; the
NATS API passes the same patches to the same functions.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drasim.apistore import patches
from drasim.common import errors

POD: dict[str, Any] = {
    "metadata": {
        "name": "p",
        "labels": {"app": "web", "tier": "1"},
        "finalizers": ["a", "b"],
        "ownerReferences": [{"uid": "u1", "name": "rs"}],
    },
    "spec": {
        "containers": [
            {"name": "app", "image": "v1", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "s1"},
        ],
        "tolerations": [{"key": "k1"}, {"key": "k2"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "False"}]},
}


def _with(path: str, value: Any) -> dict[str, Any]:
    """POD with the value at a dotted path replaced."""
    out = copy.deepcopy(POD)
    *parents, last = path.split(".")
    node = out
    for part in parents:
        node = node[part]
    node[last] = value
    return out


STRATEGIC = [
    (
        "containers merge by name",
        {"spec": {"containers": [{"name": "app", "image": "v2"}]}},
        _with(
            "spec.containers",
            [
                {"name": "app", "image": "v2", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "s1"},
            ],
        ),
    ),
    (
        "new element appended",
        {"spec": {"containers": [{"name": "new", "image": "n"}]}},
        _with(
            "spec.containers",
            [*POD["spec"]["containers"], {"name": "new", "image": "n"}],
        ),
    ),
    (
        "$patch delete removes an element",
        {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}},
        _with("spec.containers", POD["spec"]["containers"][:1]),
    ),
    (
        "$setElementOrder orders the list",
        {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]}},
        _with("spec.containers", POD["spec"]["containers"][::-1]),
    ),
    (
        "nested env merges by name",
        {"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}]}]}},
        _with(
            "spec.containers",
            [
                {
                    "name": "app",
                    "image": "v1",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                },
                {"name": "sidecar", "image": "s1"},
            ],
        ),
    ),
    (
        "tolerations are replaced whole",
        {"spec": {"tolerations": [{"key": "k3"}]}},
        _with("spec.tolerations", [{"key": "k3"}]),
    ),
    (
        "conditions merge by type",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X"}]}},
        _with("status.conditions", [{"type": "Ready", "status": "True"}, {"type": "X"}]),
    ),
    (
        "ownerReferences merge by uid",
        {"metadata": {"ownerReferences": [{"uid": "u2", "name": "other"}]}},
        _with(
            "metadata.ownerReferences",
            [{"uid": "u1", "name": "rs"}, {"uid": "u2", "name": "other"}],
        ),
    ),
    (
        "finalizers merge as a set",
        {"metadata": {"finalizers": ["b", "c"]}},
        _with("metadata.finalizers", ["a", "b", "c"]),
    ),
    (
        "$deleteFromPrimitiveList",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
        _with("metadata.finalizers", ["b"]),
    ),
    (
        "null deletes a key",
        {"metadata": {"labels": {"tier": None}}},
        _with("metadata.labels", {"app": "web"}),
    ),
    (
        "$patch replace on a map",
        {"metadata": {"labels": {"$patch": "replace", "only": "this"}}},
        _with("metadata.labels", {"only": "this"}),
    ),
    (
        "$patch replace on a list",
        {"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "x"}]}},
        _with("spec.containers", [{"name": "solo", "image": "x"}]),
    ),
    (
        "$retainKeys drops unlisted keys",
        {"spec": {"$retainKeys": ["containers"], "containers": []}},
        {**POD, "spec": {"containers": POD["spec"]["containers"]}},
    ),
]


@pytest.mark.parametrize(
    ("patch", "want"), [c[1:] for c in STRATEGIC], ids=[c[0] for c in STRATEGIC]
)
def test_strategic_merge_patch(patch, want):
    assert patches.apply("strategic", POD, patch) == want


def test_apply_patch_merges_the_applied_configuration():
    applied = {"spec": {"containers": [{"name": "app", "image": "v3"}]}}
    merged = patches.apply("apply", POD, applied)
    assert [(c["name"], c["image"]) for c in merged["spec"]["containers"]] == [
        ("app", "v3"),
        ("sidecar", "s1"),
    ]


def test_merge_patch():
    patch = {"metadata": {"labels": {"app": None, "new": "x"}}, "spec": {"tolerations": None}}
    merged = patches.apply("merge", POD, patch)
    assert merged["metadata"]["labels"] == {"tier": "1", "new": "x"}
    assert "tolerations" not in merged["spec"]


JSON_PATCHES: list[tuple[str, list[dict[str, Any]], str, Any]] = [
    ("add to a map", [{"op": "add", "path": "/metadata/labels/x", "value": "y"}],
     "metadata.labels", {"app": "web", "tier": "1", "x": "y"}),
    ("append with -", [{"op": "add", "path": "/metadata/finalizers/-", "value": "c"}],
     "metadata.finalizers", ["a", "b", "c"]),
    ("insert at an index", [{"op": "add", "path": "/metadata/finalizers/0", "value": "z"}],
     "metadata.finalizers", ["z", "a", "b"]),
    ("remove", [{"op": "remove", "path": "/metadata/labels/app"}],
     "metadata.labels", {"tier": "1"}),
    ("replace", [{"op": "replace", "path": "/spec/containers/1/image", "value": "s2"}],
     "spec.containers", [POD["spec"]["containers"][0], {"name": "sidecar", "image": "s2"}]),
    ("move", [{"op": "move", "from": "/metadata/labels/tier", "path": "/metadata/labels/level"}],
     "metadata.labels", {"app": "web", "level": "1"}),
    ("copy", [{"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/b"}],
     "metadata.labels", {"app": "web", "tier": "1", "b": "web"}),
    ("escaped keys", [{"op": "add", "path": "/metadata/labels/example.com~1gpu", "value": "1"}],
     "metadata.labels", {"app": "web", "tier": "1", "example.com/gpu": "1"}),
    ("test then act", [{"op": "test", "path": "/metadata/name", "value": "p"},
                       {"op": "remove", "path": "/metadata/finalizers"}],
     "metadata.finalizers", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("ops", "path", "want"), [c[1:] for c in JSON_PATCHES], ids=[c[0] for c in JSON_PATCHES]
)
def test_json_patch(ops, path, want):
    result = patches.apply("json", POD, ops)
    *parents, last = path.split(".")
    for part in parents:
        result = result[part]
    assert result.get(last) == want


@pytest.mark.parametrize(
    ("patch_type", "patch", "error"),
    [
        ("json", [{"op": "test", "path": "/metadata/name", "value": "q"}], errors.Invalid),
        ("json", [{"op": "remove", "path": "/metadata/missing"}], errors.Invalid),
        ("json", [{"op": "add", "path": "/metadata/finalizers/9", "value": "x"}], errors.Invalid),
        ("json", [{"op": "jump", "path": "/x"}], errors.BadRequest),
        ("json", {"op": "add"}, errors.BadRequest),
        ("strategic", {"spec": {"containers": [{"image": "no-name"}]}}, errors.BadRequest),
        ("strategic", {"$patch": "delete"}, errors.BadRequest),
        ("merge", [1], errors.BadRequest),
    ],
    ids=[
        "failed-test", "missing-path", "index-out-of-range", "unknown-op", "not-a-list",
        "missing-merge-key", "delete-everything", "merge-not-an-object",
    ],
)  # fmt: skip
def test_bad_patches(patch_type, patch, error):
    with pytest.raises(error):
        patches.apply(patch_type, POD, patch)


def test_patches_leave_the_target_alone():
    before = repr(POD)
    patches.apply("json", POD, [{"op": "remove", "path": "/spec/containers/0"}])
    patches.apply("strategic", POD, {"spec": {"containers": [{"name": "app", "$patch": "delete"}]}})
    assert repr(POD) == before
