"""How long an emulated container runs and how it exits, as its pod asks.

Emulated containers run no process; these annotations (on a pod, or on a workload's pod
template, whence its pods get them) say what the process would do:

- `drasim.io/run-for: 30s` (a Go duration) and `drasim.io/exit-code: "0"` apply to the
  pod's regular containers;
- `run-for.drasim.io/<container>` and `exit-code.drasim.io/<container>` apply to one
  container, init containers and sidecars included, and win over the pod-wide ones.

Without either a regular container (and a sidecar) runs until its pod is deleted, and an
init container completes at once with exit code 0. The first of a cluster file's
`podDefaults` that selects the pod stands in for each pod-wide annotation the pod does not
carry (`drasim.common.cluster_file`). The apistore refuses a pod or template whose
annotations cannot be read (`validate_annotations`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from drasim.common.api import core_v1, resources
from drasim.common.duration import parse_go_duration

if TYPE_CHECKING:  # the cluster file imports the API validation, which imports this
    from drasim.common.cluster_file import PodDefault

__all__ = [
    "EXIT_CODE_ANNOTATION",
    "EXIT_CODE_PREFIX",
    "RUN_FOR_ANNOTATION",
    "RUN_FOR_PREFIX",
    "RunPlan",
    "plans",
    "validate_annotations",
]

RUN_FOR_ANNOTATION = "drasim.io/run-for"
EXIT_CODE_ANNOTATION = "drasim.io/exit-code"
RUN_FOR_PREFIX = "run-for.drasim.io/"
EXIT_CODE_PREFIX = "exit-code.drasim.io/"


@dataclass(frozen=True)
class RunPlan:
    """One container's emulated process: it exits `run_for` seconds after it starts with
    `exit_code`, or runs until killed (`run_for` None)."""

    run_for: float | None = None
    exit_code: int = 0


def _run_for(text: str) -> float:
    seconds = parse_go_duration(text)
    if seconds < 0:
        raise ValueError("must be greater than or equal to 0")
    return seconds


def _exit_code(text: str) -> int:
    try:
        code = int(text, 10)
    except ValueError:
        raise ValueError("must be an integer exit code") from None
    if not 0 <= code <= 255:
        raise ValueError("must be between 0 and 255, inclusive")
    return code


def _checks(annotations: Mapping[str, str]) -> Iterator[tuple[str, str, str]]:
    """(key, value, problem) of each annotation of ours that cannot be read."""
    for key, value in annotations.items():
        if key == RUN_FOR_ANNOTATION or key.startswith(RUN_FOR_PREFIX):
            parse = _run_for
        elif key == EXIT_CODE_ANNOTATION or key.startswith(EXIT_CODE_PREFIX):
            parse = _exit_code  # type: ignore[assignment]
        else:
            continue
        try:
            parse(value)
        except ValueError as exc:
            yield key, value, str(exc)


def validate_annotations(annotations: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(key, value, problem) for each run annotation whose value cannot be read."""
    return list(_checks(annotations))


def plans(pod: core_v1.Pod, defaults: Sequence[PodDefault] = ()) -> dict[str, RunPlan]:
    """Container name → its plan, for init and regular containers. Values that cannot be
    read (the apistore refuses them; a pod stored before may still have one) count as
    absent."""
    annotations = pod.metadata.annotations
    bad = {key for key, _, _ in _checks(annotations)}

    def get(key: str) -> str | None:
        return annotations.get(key) if key not in bad else None

    default = next((d for d in defaults if d.matches(pod)), None)
    pod_plan = _own("", RunPlan(
        default.run_for_seconds() if default is not None else None,
        default.exit_code or 0 if default is not None else 0,
    ), get)  # fmt: skip
    found: dict[str, RunPlan] = {}
    for container in pod.spec.init_containers:
        sidecar = resources.is_restartable_init_container(container)
        found[container.name] = _own(container.name, RunPlan(None if sidecar else 0.0), get)
    for container in pod.spec.containers:
        found[container.name] = _own(container.name, pod_plan, get)
    return found


def _own(name: str, base: RunPlan, get: Callable[[str], str | None]) -> RunPlan:
    """`base`, with what the container's own annotations say instead (the pod's with
    name '')."""
    if name:
        run_for, exit_code = get(RUN_FOR_PREFIX + name), get(EXIT_CODE_PREFIX + name)
    else:
        run_for, exit_code = get(RUN_FOR_ANNOTATION), get(EXIT_CODE_ANNOTATION)
    return RunPlan(
        _run_for(run_for) if run_for is not None else base.run_for,
        _exit_code(exit_code) if exit_code is not None else base.exit_code,
    )
