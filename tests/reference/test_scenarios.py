"""The scenario files, checked without Go."""

from __future__ import annotations

from drasim.common import cluster_file
from reference import kube, scenarios


def test_every_scenario_loads_and_uses_known_kinds() -> None:
    found = scenarios.load_all()
    assert len(found) >= 10
    for scenario in found:
        assert scenario.description, scenario.name
        if scenario.cluster is not None:
            cluster_file.load(scenario.cluster)
        for step in scenario.steps:
            for obj in step.objects:
                kube.resource_for(obj["apiVersion"], obj["kind"])
            if step.target:
                kube.resource_for(step.target["apiVersion"], step.target["kind"])
