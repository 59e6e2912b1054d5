"""The differential scenarios as tests (marked `reference`): each runs on drasim and on
upstream's control plane and fails on a difference not in reference/divergences.yaml.

They start two clusters, so they run only when asked (`./dev test -m reference`), and skip
with the reason where `reference/build` has not built upstream's binaries: `./dev test` on
a fresh machine never needs Go. `reference/compare` runs the same scenarios from a shell.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reference import compare, diff, paths, scenarios
from reference.compare import Side

pytestmark = pytest.mark.reference

SCENARIOS = scenarios.load_all()


def _not_asked(config: pytest.Config) -> bool:
    expression = str(config.getoption("markexpr") or "")
    return "reference" not in expression or "not reference" in expression


@pytest.fixture(scope="module")
def pair_for(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[Path | None], tuple[Side, Side]]]:
    """drasim and upstream for a cluster file, started on first use, kept for the module."""
    if _not_asked(request.config):
        pytest.skip(
            "differential scenarios start drasim and upstream's control plane: "
            "run them with `./dev test -m reference` (or reference/compare)"
        )
    reason = paths.missing_reason()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("compare")
    started: dict[Path | None, tuple[Side, Side]] = {}
    with contextlib.ExitStack() as stack:

        def get(cluster: Path | None) -> tuple[Side, Side]:
            if cluster not in started:
                # One pair at a time: the machine has two cores.
                stack.close()
                started.clear()
                started[cluster] = stack.enter_context(compare.sides(work, cluster, print))
            return started[cluster]

        yield get


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(
    scenario: scenarios.Scenario, pair_for: Callable[[Path | None], tuple[Side, Side]]
) -> None:
    ours, theirs = compare.run_pair(pair_for(scenario.cluster), scenario)
    known = diff.load_divergences(compare.DIVERGENCES)
    differences = diff.compare(scenario.name, ours.observation, theirs.observation, known)
    failing = [d for d in differences if d.known is None]
    assert not failing, "\n" + diff.render_table(differences)
