"""Strategy of scheduling.k8s.io/v1 PriorityClasses (upstream
`pkg/registry/scheduling/priorityclass/`): API defaulting and the Priority admission's
one-global-default rule, and the system classes that stay."""

from __future__ import annotations

from drasim.apistore import admission
from drasim.apistore.strategies.base import Admission, Strategy
from drasim.common.api import scheduling_v1

__all__ = ["STRATEGIES"]


class PriorityClassStrategy(Strategy):
    def admit_create(self, obj: scheduling_v1.PriorityClass, batch: Admission) -> None:
        admission.default_priority_class(obj)
        admission.admit_priority_class(obj, batch.default_priority_class())

    def admit_update(self, new: scheduling_v1.PriorityClass, batch: Admission) -> None:
        admission.admit_priority_class(new, batch.default_priority_class())

    def before_delete(self, obj: scheduling_v1.PriorityClass) -> None:
        admission.admit_priority_class_deletion(obj)


STRATEGIES: dict[str, Strategy] = {"priorityclasses": PriorityClassStrategy()}
