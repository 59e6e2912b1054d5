"""Label and field selectors applied to stored object JSON, decoding only the fields they read.

Shared by the apistore's list and by replayed views, so a selector means the same in both.
"""

from __future__ import annotations

from typing import Any

import msgspec

from drasim.common import errors, labels

# Field selectors served per resource (Kubernetes serves a few per kind, and always
# metadata.name and metadata.namespace).
FIELD_SELECTORS: dict[str, frozenset[str]] = {
    "pods": frozenset({"spec.nodeName", "status.phase", "spec.schedulerName"}),
    "resourceslices": frozenset({"spec.nodeName", "spec.driver"}),
    "events": frozenset(
        {
            "involvedObject.name",
            "involvedObject.namespace",
            "involvedObject.kind",
            "involvedObject.uid",
            "reason",
        }
    ),
}


class _Meta(msgspec.Struct):
    labels: dict[str, str] | None = None
    name: str = ""
    namespace: str = ""


class View(msgspec.Struct):
    """The few fields selectors read, decoded instead of the whole object."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    involvedObject: dict[str, Any] | None = None  # noqa: N815 - Kubernetes JSON name
    reason: str | None = None


view_decoder = msgspec.json.Decoder(View)


def field_value(view: View, path: str) -> str:
    head, _, tail = path.partition(".")
    if head == "metadata":
        return getattr(view.metadata, tail, "") or ""
    if head == "reason":
        return view.reason or ""
    source = {"spec": view.spec, "status": view.status, "involvedObject": view.involvedObject}
    value = (source.get(head) or {}).get(tail, "")
    return "" if value is None else str(value)


class Selection:
    """A parsed label selector and field selector for one resource."""

    def __init__(self, resource: str, label_selector: str = "", field_selector: str = "") -> None:
        self.labels = labels.parse(label_selector)
        self.fields = labels.parse_field_selector(field_selector)
        allowed = {"metadata.name", "metadata.namespace"} | FIELD_SELECTORS.get(resource, set())
        for path in self.fields:
            if path not in allowed:
                raise errors.BadRequest(
                    f'field label not supported: {path} ("{path}" is not a known field '
                    f"selector for {resource})"
                )

    def everything(self) -> bool:
        return self.labels.empty() and not self.fields

    def equals(self, path: str) -> str | None:
        """The value a `path=value` term asks for (to narrow a query), if any. A value with
        a NUL is never one: no stored name holds one, and Postgres refuses it in a query
        (the term still applies, as a filter that matches nothing)."""
        term = self.fields.get(path)
        if term is None or term[0] != "=" or "\0" in term[1]:
            return None
        return term[1]

    def matches(self, data: bytes) -> bool:
        if self.everything():
            return True
        view = view_decoder.decode(data)
        if not self.labels.matches(view.metadata.labels):
            return False
        return all(
            (field_value(view, path) == value) == (op == "=")
            for path, (op, value) in self.fields.items()
        )
