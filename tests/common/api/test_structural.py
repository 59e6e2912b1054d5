"""A CRD schema applied to custom objects: pruning, defaulting and the basic constraints,
with upstream's paths and messages."""

from __future__ import annotations

import pytest

from drasim.common.api import structural

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["model"],
            "properties": {
                "model": {"type": "string", "maxLength": 4, "pattern": "^[A-Z]"},
                "gpus": {"type": "integer", "default": 1, "minimum": 1, "maximum": 8},
                "mode": {"type": "string", "enum": ["fast", "thorough"]},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "port": {"x-kubernetes-int-or-string": True},
                "nodes": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
            },
        }
    },
}


def test_prune_drops_what_the_schema_does_not_name_and_says_where():
    obj = {
        "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "extra": 1,
        "spec": {"model": "A", "color": "red", "raw": {"any": {"thing": 1}},
                 "limits": {"a": 1}, "nodes": [{"name": "n", "zone": "z"}]},
    }  # fmt: skip
    removed: list[str] = []
    pruned = structural.prune(obj, SCHEMA, removed=removed)
    assert pruned == {
        "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
        "spec": {"model": "A", "raw": {"any": {"thing": 1}}, "limits": {"a": 1},
                 "nodes": [{"name": "n"}]},
    }  # fmt: skip
    assert removed == ["extra", "spec.color", "spec.nodes[0].zone"]


def test_defaults_fill_absent_fields_under_present_parents():
    assert structural.apply_defaults({"spec": {"model": "A"}}, SCHEMA) == {
        "spec": {"model": "A", "gpus": 1}
    }
    assert structural.apply_defaults({}, SCHEMA) == {}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"model": "A"}, []),
        ({}, ["spec.model: Required value"]),
        ({"model": 5}, ['spec.model: Invalid value: "integer": spec.model in body must be of '
                        'type string: "integer"']),
        ({"model": "ABCDE"}, ["spec.model: Too long: may not be more than 4 bytes"]),
        ({"model": "a"}, ['spec.model: Invalid value: "a": spec.model in body should match '
                          "'^[A-Z]'"]),
        ({"model": "A", "gpus": 0}, ["spec.gpus: Invalid value: 0: spec.gpus in body should be "
                                     "greater than or equal to 1"]),
        ({"model": "A", "mode": "slow"}, ['spec.mode: Unsupported value: "slow": supported '
                                          'values: "fast", "thorough"']),
        ({"model": "A", "tags": ["a", "b", "c"]}, ["spec.tags: Too many: 3: must have at most 2 "
                                                   "items"]),
        ({"model": "A", "limits": {"x": "1"}}, ['spec.limits.x: Invalid value: "string": '
                                                "spec.limits.x in body must be of type integer: "
                                                '"string"']),
        ({"model": "A", "port": "http"}, []),
        ({"model": "A", "port": 80}, []),
    ],
    ids=["valid", "required", "type", "maxLength", "pattern", "minimum", "enum", "maxItems",
         "additionalProperties", "int-or-string-text", "int-or-string-number"],
)  # fmt: skip
def test_validate_checks_the_basic_constraints(spec, expected):
    errs = structural.validate({"spec": spec}, SCHEMA)
    assert [str(e) for e in errs] == expected
