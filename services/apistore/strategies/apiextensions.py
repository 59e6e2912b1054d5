"""Strategies of CustomResourceDefinitions and of the custom resources they serve
(upstream `apiextensions-apiserver/pkg/registry/customresourcedefinition/strategy.go` and
`pkg/registry/customresource/strategy.go`).

A CRD is accepted and established in the write that makes it: upstream's naming and
establishing controllers set the same conditions a moment later, and kubectl's next
request finds the kind served either way. A custom object is validated against its
version's schema (pruned and defaulted when it was decoded, see `customresources`).
"""

from __future__ import annotations

from typing import Any

from drasim.apistore.strategies.base import Strategy
from drasim.common import codec, tables
from drasim.common.api import apiextensions_v1, customresources, structural
from drasim.common.api.apiextensions_v1 import CustomResourceDefinitionCondition as Condition
from drasim.common.api.validation import meta
from drasim.common.errors import FieldError

__all__ = ["STRATEGIES", "custom_resource_strategy"]


class CustomResourceDefinitionStrategy(Strategy):
    status_subresource = True
    generation = True

    def prepare_for_create(self, obj: apiextensions_v1.CustomResourceDefinition) -> None:
        super().prepare_for_create(obj)
        _accept_names(obj, obj.metadata.creation_timestamp)

    def prepare_for_update(self, new: Any, old: Any) -> None:
        super().prepare_for_update(new, old)
        _accept_names(new, tables.format_time())


def _accept_names(crd: apiextensions_v1.CustomResourceDefinition, now: str | None) -> None:
    """The naming and establishing controllers' verdict: the names taken, and whether the
    kind is served (upstream `naming_controller.go`, `establishing_controller.go`)."""
    status = crd.status
    conflict = customresources.conflict(crd)
    if conflict:
        accepted = Condition(
            type="NamesAccepted", status="False", reason="PluralConflict", message=conflict
        )
        established = Condition(
            type="Established", status="False", reason="NotAccepted",
            message="not all names are accepted",
        )  # fmt: skip
    else:
        status.accepted_names = codec.convert(
            codec.to_builtins(crd.spec.names), apiextensions_v1.CustomResourceDefinitionNames
        )
        accepted = Condition(
            type="NamesAccepted", status="True", reason="NoConflicts", message="no conflicts found"
        )
        established = Condition(
            type="Established", status="True", reason="InitialNamesAccepted",
            message="the initial names have been accepted",
        )  # fmt: skip
    before = {c.type: c for c in status.conditions}
    for condition in (accepted, established):
        old = before.get(condition.type)
        kept = old is not None and old.status == condition.status
        condition.last_transition_time = old.last_transition_time if kept and old else now
    status.conditions = [accepted, established]
    version = crd.storage_version()
    if version is not None and version.name not in status.stored_versions:
        status.stored_versions = [*status.stored_versions, version.name]


class CustomResourceStrategy(Strategy):
    """One custom resource's rules: generation counted, status apart when the CRD has the
    subresource, the schema's validation."""

    generation = True

    def __init__(self, served: customresources.CustomResource) -> None:
        self.served = served
        self.status_subresource = served.status_subresource  # type: ignore[misc]

    def prepare_for_create(self, obj: Any) -> None:
        obj.metadata.generation = 1
        if self.status_subresource and hasattr(obj, "status"):
            obj.status = None

    def prepare_for_update(self, new: Any, old: Any) -> None:
        if self.status_subresource and hasattr(new, "status"):
            new.status = old.status
        if _content(new) != _content(old):
            new.metadata.generation = (old.metadata.generation or 0) + 1

    def validate(self, obj: Any) -> list[FieldError]:
        errs = meta.validate_object_meta(
            obj.metadata, namespaced=self.served.info.namespaced, name_rule=meta.SUBDOMAIN_NAME
        )
        found = structural.validate(codec.to_builtins(obj), self.served.schema)
        return errs + sorted(found, key=lambda e: e.field)

    def validate_update(self, new: Any, old: Any) -> list[FieldError]:
        errs = meta.validate_object_meta_update(new.metadata, old.metadata)
        return errs + self.validate(new)

    def validate_status_update(self, new: Any, old: Any) -> list[FieldError]:
        return self.validate_update(new, old)


def _content(obj: Any) -> dict[str, Any]:
    """What counts as a change of a custom object for its generation: all but metadata and
    (with the subresource) status."""
    data = codec.to_builtins(obj)
    return {k: v for k, v in data.items() if k not in ("metadata", "status")}


_CUSTOM: dict[str, tuple[customresources.CustomResource, CustomResourceStrategy]] = {}


def custom_resource_strategy(plural: str) -> Strategy | None:
    """The strategy of a served custom resource (None: no such resource)."""
    served = customresources.by_plural(plural)
    if served is None:
        return None
    known = _CUSTOM.get(plural)
    if known is None or known[0] is not served:
        known = _CUSTOM[plural] = (served, CustomResourceStrategy(served))
    return known[1]


STRATEGIES: dict[str, Strategy] = {
    "customresourcedefinitions": CustomResourceDefinitionStrategy(),
}
