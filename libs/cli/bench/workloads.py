"""The workloads of upstream's scheduler_perf `performance-config.yaml`, as drasim keeps it.

Each test has a `workloadTemplate` (a list of ops such as `createNodes`, `createPods`) and
`workloads` that fill the ops' `countParam`s (`$initPods`) and may carry upstream's
`threshold` in pods/s (kubernetes/kubernetes `test/integration/scheduler_perf`). The ops
stay plain dicts: `drasim.cli.bench.runner` runs each opcode as upstream does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CONFIG = Path(__file__).resolve().parents[3] / "benchmarks" / "scheduler_perf"
CONFIG_FILE = "performance-config.yaml"
DEFAULT_NODE_TEMPLATE = "templates/node-default.yaml"


@dataclass(frozen=True)
class Workload:
    """One workload of a test, its ops' params filled in."""

    name: str  # "Test/workload"
    ops: list[dict[str, Any]]
    params: dict[str, Any]  # counts; also steadyState (bool) and duration ("10s")
    threshold: float | None
    base: Path  # templates are relative to the config file

    def count(self, op: dict[str, Any], key: str = "count") -> int:
        """An op's count: literal, or a `$param`; 1 when it has neither."""
        param = op.get(f"{key}Param")
        if param is not None:
            return int(self.params[param.removeprefix("$")])
        return int(op.get(key, 1))

    def flag(self, op: dict[str, Any], key: str) -> bool:
        """An op's boolean: literal, or a `$param`; False when it has neither."""
        param = op.get(f"{key}Param")
        if param is not None:
            return bool(self.params[param.removeprefix("$")])
        return bool(op.get(key, False))

    def duration(self, op: dict[str, Any]) -> float:
        """An op's `duration` (Go's form: `10s`, `1m30s`, `500ms`) in seconds."""
        param = op.get("durationParam")
        text = str(self.params[param.removeprefix("$")] if param else op.get("duration", "0s"))
        units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ValueError(f"{self.name}: duration {text!r} is not like 10s or 1m30s")
        return sum(float(n) * units[u] for n, u in parts)

    @property
    def measured_namespace(self) -> str:
        measured = [op for op in self.ops if op.get("collectMetrics")]
        if len(measured) != 1:
            raise ValueError(f"{self.name}: exactly one op must have collectMetrics: true")
        return measured[0]["namespace"]

    @property
    def namespaces(self) -> list[str]:
        return list(dict.fromkeys(op["namespace"] for op in self.ops if op.get("namespace")))

    @property
    def needs_controllers(self) -> bool:
        """Pods using a ResourceClaimTemplate get their claims from the ResourceClaim
        controller, so the controller manager must run."""
        return any(
            _template_kind(self.base / op["templatePath"]) == "ResourceClaimTemplate"
            for op in self.ops
            if op["opcode"] == "createAny"
        )


def load_workloads(path: Path) -> dict[str, Workload]:
    """Every `Test/workload` of the configuration file, in file order."""
    tests = yaml.safe_load(path.read_text())
    workloads: dict[str, Workload] = {}
    for test in tests:
        for w in test["workloads"]:
            name = f"{test['name']}/{w['name']}"
            workloads[name] = Workload(
                name=name,
                ops=test["workloadTemplate"],
                params=w.get("params", {}),
                threshold=w.get("threshold"),
                base=path.parent,
            )
    return workloads


def _template_kind(path: Path) -> str:
    return yaml.safe_load(path.read_text())["kind"]
