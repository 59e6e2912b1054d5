"""Validation of policy/v1 PodDisruptionBudgets, as upstream's
`ValidatePodDisruptionBudgetSpec` and `ValidatePodDisruptionBudgetStatusUpdate`."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.common import codec, errors
from drasim.common.api import policy_v1, validation


def pdb(**spec: Any) -> policy_v1.PodDisruptionBudget:
    return codec.convert(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        },
        policy_v1.PodDisruptionBudget,
    )


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"minAvailable": 2}, []),
        ({"minAvailable": 0}, []),
        ({"minAvailable": "50%"}, []),
        ({"maxUnavailable": "100%"}, []),
        ({"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow"}, []),
        ({}, []),
        ({"minAvailable": -1}, [("FieldValueInvalid", "spec.minAvailable")]),
        ({"maxUnavailable": "101%"}, [("FieldValueInvalid", "spec.maxUnavailable")]),
        ({"minAvailable": "half"}, [("FieldValueInvalid", "spec.minAvailable")]),
        ({"minAvailable": "-5%"}, [("FieldValueInvalid", "spec.minAvailable")]),
        ({"minAvailable": 1, "maxUnavailable": 1}, [("FieldValueInvalid", "spec")]),
        (
            {"unhealthyPodEvictionPolicy": "Sometimes"},
            [("FieldValueNotSupported", "spec.unhealthyPodEvictionPolicy")],
        ),
        (
            {"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}},
            [("FieldValueRequired", "spec.selector.matchExpressions[0].values")],
        ),
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else None,
)
def test_validate_spec(spec: dict[str, Any], want: list[tuple[str, str]]) -> None:
    got = validation.validate(pdb(**spec))
    assert [(e.type, e.field) for e in got] == want


def test_error_text_matches_upstream() -> None:
    [both] = validation.validate(pdb(minAvailable=1, maxUnavailable=1))
    assert both.message.endswith(": minAvailable and maxUnavailable cannot be both set")
    [over] = validation.validate(pdb(maxUnavailable="150%"))
    assert str(over) == 'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%'
    [negative] = validation.validate(pdb(minAvailable=-2))
    assert str(negative) == (
        "spec.minAvailable: Invalid value: -2: must be greater than or equal to 0"
    )
    invalid = errors.invalid("PodDisruptionBudget", "web", [negative], group="policy")
    assert invalid.code == 422


def test_status_counts_are_never_negative() -> None:
    budget = pdb(minAvailable=1)
    budget.status.disruptions_allowed = -1
    budget.status.expected_pods = -3
    got = validation.validate_status(budget, old=pdb(minAvailable=1))
    assert [e.field for e in got] == ["status.disruptionsAllowed", "status.expectedPods"]
