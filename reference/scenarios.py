"""Differential scenarios: files under `reference/scenarios/`, one scenario each.

    name: kep-example                    # also the namespace suffix: ref-kep-example
    description: what it shows, one or two sentences
    cluster: mixed.cluster.yaml          # optional, beside the file; default KEP example
    steps:
      - apply: |                         # YAML documents, created in order (POST, not
          apiVersion: v1                 #   apply: a refusal is observed, not retried)
          kind: Pod
          ...
      - settle: true                     # wait until every pod is bound or unschedulable
      - sleep: 1.1                       # e.g. so two DeviceClasses differ in creation time
      - patch: {apiVersion: ..., kind: ..., name: ..., patch: {...}}   # JSON merge patch
      - delete: {apiVersion: ..., kind: ..., name: ...}

Namespaced objects without a namespace go into the scenario's namespace; cluster-scoped
ones (DeviceClasses, PriorityClasses) are deleted again when the scenario ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["SCENARIO_DIR", "Scenario", "Step", "load", "load_all"]

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
_STEP_KINDS = ("apply", "settle", "sleep", "patch", "delete")


@dataclass(frozen=True)
class Step:
    kind: str
    objects: list[dict[str, Any]] = field(default_factory=list)  # apply
    target: dict[str, Any] = field(default_factory=dict)  # patch, delete
    seconds: float = 0.0  # sleep


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    steps: list[Step]
    path: Path
    cluster: Path | None = None

    @property
    def namespace(self) -> str:
        return f"ref-{self.name}"


def load(path: Path) -> Scenario:
    """One scenario file; errors name the file and the step."""
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict) or not doc.get("name") or not doc.get("steps"):
        raise ValueError(f"{path}: a scenario needs a name and steps")
    steps = []
    for i, raw in enumerate(doc["steps"]):
        kinds = [k for k in _STEP_KINDS if k in raw]
        if len(kinds) != 1:
            raise ValueError(f"{path}: step {i + 1}: one of {', '.join(_STEP_KINDS)}")
        kind = kinds[0]
        if kind == "apply":
            objects = [d for d in yaml.safe_load_all(raw["apply"]) if d]
            steps.append(Step(kind, objects=objects))
        elif kind in ("patch", "delete"):
            target = raw[kind]
            if not all(target.get(k) for k in ("apiVersion", "kind", "name")):
                raise ValueError(f"{path}: step {i + 1}: {kind} needs apiVersion, kind, name")
            steps.append(Step(kind, target=target))
        elif kind == "sleep":
            steps.append(Step(kind, seconds=float(raw["sleep"])))
        else:
            steps.append(Step(kind))
    cluster = path.parent / doc["cluster"] if doc.get("cluster") else None
    return Scenario(
        name=str(doc["name"]),
        description=" ".join(str(doc.get("description", "")).split()),
        steps=steps,
        path=path,
        cluster=cluster,
    )


def load_all(directory: Path = SCENARIO_DIR) -> list[Scenario]:
    """Every `*.yaml` scenario (cluster files end in `.cluster.yaml`), in file name order."""
    found = [
        load(p) for p in sorted(directory.glob("*.yaml")) if not p.name.endswith(".cluster.yaml")
    ]
    names = [s.name for s in found]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"{directory}: scenario names used twice: {', '.join(sorted(duplicates))}")
    return found
