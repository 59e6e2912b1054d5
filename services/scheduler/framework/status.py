"""A plugin's verdict: the closed list of codes, each with what the framework and the
queue do next, and `Status` (code, reasons, error, plugin); `None` stands for success.

Upstream: `staging/src/k8s.io/kube-scheduler/framework/interface.go` (`Code`, `Status`).
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = [
    "Code",
    "FrameworkError",
    "Status",
    "as_error",
    "code_name",
    "is_rejected",
    "is_skip",
    "is_success",
    "wrap",
]


class Code(enum.IntEnum):
    """A plugin's verdict. Each code decides what the framework and the queue do next."""

    SUCCESS = 0
    """The plugin ran and the pod may go on. `None` means the same."""
    ERROR = 1
    """An internal failure (bad input, API error). The attempt is aborted, no PostFilter runs,
    and the pod is requeued to backoff without recording the plugin as a rejector, so any
    cluster event or the backoff timer retries it."""
    UNSCHEDULABLE = 2
    """The pod does not fit; PostFilter (e.g. preemption) may help. The pod waits in the
    unschedulable pool until an event registered by the rejecting plugin (and its hint)
    requeues it, then goes through backoff as a penalty for the wasted cycle."""
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    """The pod does not fit and PostFilter cannot change that on this node (preemption skips
    it). Queueing as UNSCHEDULABLE: wait for a registered event, then backoff."""
    WAIT = 4
    """A Permit plugin holds the pod before binding."""
    SKIP = 5
    """The plugin has nothing to do: from PreFilter its Filter is skipped for this pod, from
    PreScore its Score, from Bind the next binder is asked."""
    PENDING = 6
    """The cycle went well but the plugin waits for something external before binding. The
    pod is requeued straight to activeQ when its event arrives, without backoff."""

    def __str__(self) -> str:
        """Upstream's spelling, used in logs and metric labels: `UnschedulableAndUnresolvable`."""
        return "".join(part.title() for part in self.name.split("_"))


@dataclasses.dataclass(slots=True)
class Status:
    """A plugin's result: code, reasons, an optional error and the plugin that set it.

    `None` stands for success everywhere, as upstream's nil `*Status`; use `is_success`.
    The error field is `err` (upstream's name) because `Status.error(...)` builds one.
    """

    code: Code
    reasons: list[str] = dataclasses.field(default_factory=list)
    err: BaseException | None = None
    plugin: str = ""

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, list(reasons))

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, list(reasons))

    @classmethod
    def error(cls, err: BaseException | str) -> Status:
        """Wrap an internal failure (upstream `AsStatus`)."""
        return cls(Code.ERROR, err=err if isinstance(err, BaseException) else Exception(err))

    @classmethod
    def skip(cls) -> Status:
        return cls(Code.SKIP)

    def all_reasons(self) -> list[str]:
        """The reasons with the error's text first (upstream `Reasons()`)."""
        return [str(self.err), *self.reasons] if self.err is not None else list(self.reasons)

    def message(self) -> str:
        return ", ".join(self.all_reasons())

    def with_plugin(self, plugin: str) -> Status:
        self.plugin = plugin
        return self


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


def is_skip(status: Status | None) -> bool:
    return status is not None and status.code == Code.SKIP


def is_rejected(status: Status | None) -> bool:
    """Unschedulable, unresolvable or pending: the plugin turned the pod away."""
    return status is not None and status.code in (
        Code.UNSCHEDULABLE,
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        Code.PENDING,
    )


def code_name(status: Status | None) -> str:
    return str(status.code if status is not None else Code.SUCCESS)


class FrameworkError(Exception):
    """A plugin returned Error: the scheduling attempt is aborted (upstream returns `err`)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def as_error(status: Status) -> BaseException:
    return status.err if status.err is not None else Exception(status.message())


def wrap(context: str, status: Status) -> Status:
    """An Error status naming the plugin, as upstream's `fmt.Errorf("running …: %w")`."""
    cause = as_error(status)
    err = Exception(f"{context}: {cause}")
    err.__cause__ = cause
    return Status(Code.ERROR, err=err, plugin=status.plugin)
