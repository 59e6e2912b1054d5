"""A kind's rules on the write path, as upstream's registry strategies
(`pkg/registry/<group>/<kind>/strategy.go`: `PrepareForCreate`, `PrepareForUpdate`,
`Validate`, `ValidateUpdate`, and the status strategy's counterparts).

`Batch` (`drasim.apistore.mutations`) runs the same steps for every write and asks the
kind's `Strategy` at each: what a create resets, what an update keeps, when
`metadata.generation` moves, which validation applies, the kind's part in admission, how a
delete proceeds, and which node its events are routed to. `Strategy` itself is a kind with
no rule of its own (an Event); each group's module (`core`, `apps`, ...) subclasses it for
the kinds that have some.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from drasim.common.api import validation
from drasim.common.errors import FieldError

if TYPE_CHECKING:
    from drasim.apistore import rbac
    from drasim.apistore.admission import PriorityClass
    from drasim.apistore.request import Context
    from drasim.common.api import core_v1
    from drasim.common.featuregate import FeatureGate

__all__ = ["Admission", "Strategy"]


class Admission(Protocol):
    """What admission reads of the batch a write runs in: the classes and roles as the
    batch sees them (its own writes first, then the committed ones), and who writes."""

    policy: rbac.Policy
    features: FeatureGate

    def priority_class(self, name: str) -> PriorityClass | None: ...

    def default_priority_class(self) -> PriorityClass | None: ...

    def namespace(self, name: str) -> core_v1.Namespace | None: ...


class Strategy:
    """The rules every kind follows; a kind with rules of its own overrides a method or
    sets a class attribute."""

    # Spec and status are written apart: a main update keeps the stored status, a status
    # update the stored spec (upstream's separate status strategy), and a create starts
    # from an empty status, its controllers' to fill.
    status_subresource: ClassVar[bool] = False
    # `metadata.generation` starts at 1 and counts the changes of the spec.
    generation: ClassVar[bool] = False
    # The field whose value is the node an object's events are routed to and its row is
    # indexed by, so that a watch or list with `<field>=<node>` reads that node's alone.
    node_field: ClassVar[str] = ""
    # Every write of the kind reads its namespace (`validate_in_namespace` needs it), not
    # only a create.
    reads_namespace: ClassVar[bool] = False

    def prepare_for_create(self, obj: Any) -> None:
        """Reset what a client may not set on create."""
        if self.generation:
            obj.metadata.generation = 1
        if self.status_subresource:
            obj.status = type(obj.status)()

    def prepare_for_update(self, new: Any, old: Any) -> None:
        """Keep what an update of the main resource may not change; count spec changes
        (compared as the structs, as the no-op check compares the objects)."""
        if self.status_subresource:
            new.status = old.status
        if self.generation and getattr(new, "spec", None) != getattr(old, "spec", None):
            new.metadata.generation = (old.metadata.generation or 0) + 1

    def drop_disabled_fields(self, new: Any, old: Any | None, features: FeatureGate) -> None:
        """Clear what a disabled feature gate guards, unless `old` already uses it: upstream's
        `dropDisabledFields`, which its PrepareForCreate (`old` None) and PrepareForUpdate
        call. The batch calls it at that step, before validation."""

    def drop_disabled_status_fields(self, new: Any, old: Any, features: FeatureGate) -> None:
        """The same for a status update (the status strategy's PrepareForUpdate)."""

    def validate(self, obj: Any) -> list[FieldError]:
        return validation.validate(obj)

    def validate_update(self, new: Any, old: Any) -> list[FieldError]:
        return validation.validate(new, old=old)

    def validate_status_update(self, new: Any, old: Any) -> list[FieldError]:
        return validation.validate_status(new, old=old)

    def validate_in_namespace(
        self, new: Any, old: Any | None, subresource: str, batch: Admission
    ) -> list[FieldError]:
        """Validation that reads the object's namespace (upstream's strategies calling
        `AuthorizedForAdmin`): its errors join the others of the same write."""
        return []

    def authorize_status_update(
        self, new: Any, old: Any, verb: str, ctx: Context, batch: Admission
    ) -> list[FieldError]:
        """Checks of who may change which part of the status (`verb`: `update` or `patch`),
        beyond RBAC's on the status subresource: their errors join the others of the
        same write."""
        return []

    def guard_create(self, obj: Any, ctx: Context, batch: Admission) -> None:
        """A check of the kind's storage ahead of the rest (RBAC's policy-based storage),
        before a name is generated: raises the `ApiError` that refuses the create."""

    def guard_update(self, new: Any, old: Any, name: str, ctx: Context, batch: Admission) -> None:
        """As `guard_create`, for an update of the main resource once it is prepared."""

    def admit_create(self, obj: Any, batch: Admission) -> None:
        """Admission's part for the kind on create (before validation): may set fields,
        or raise the `ApiError` that refuses the create."""

    def admit_update(self, new: Any, batch: Admission) -> None:
        """Admission's part for the kind on update (after validation)."""

    def before_delete(self, obj: Any) -> None:
        """Refuse a delete the kind's storage does not allow (raise an `ApiError`)."""

    def grace_period(self, obj: Any, asked: int | None) -> int | None:
        """The grace period a delete takes: what was asked, else none (gone at once)."""
        return 0 if asked is None else asked

    def stays_while_terminating(self, obj: Any) -> bool:
        """Whether an object being deleted, with no finalizer left, stays for now (a pod
        its kubelet has yet to stop)."""
        return False

    def allocation_candidates(self, body: bytes) -> list[tuple[str, str, str]]:
        """The rows of what a create of this body may take from a shared pool (a cluster
        IP's IPAddress), read with its batch for `allocate`; drawn before the batch, from
        the body alone."""
        return []

    def allocate(
        self, obj: Any, taken: Callable[[tuple[str, str, str]], bool], candidates: list[Any]
    ) -> list[Any]:
        """Take what a create holds from a shared pool (upstream's REST `BeginCreate`),
        choosing among `candidates` the rows not `taken`: the objects to store with it
        (an IPAddress), or the `ApiError` that refuses the create."""
        return []

    def released_keys(self, obj: Any) -> list[tuple[str, str, str]]:
        """The rows of what the object held and its removal releases (deleted with it)."""
        return []

    def node_name(self, obj: Any) -> str:
        """The node whose kubelet cares about this object, for event routing ("" none)."""
        return ""
