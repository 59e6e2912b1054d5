"""Kubernetes label selectors (`app=x,tier!=y,env in (a,b),!legacy`) parsed once, matched often."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drasim.common import errors

_SET_OP = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP_OP = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements


def _split(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def parse(text: str) -> Selector:
    """Parse a label selector string; a bad one is a 400 naming the offending term."""
    reqs = []
    for term in _split(text or ""):
        if m := _SET_OP.match(term):
            if m.group(1):
                raise errors.BadRequest(f"unable to parse requirement: {term.strip()!r}")
            values = frozenset(v.strip() for v in m.group(4).split(",") if v.strip())
            reqs.append(Requirement(m.group(2), "In" if m.group(3) == "in" else "NotIn", values))
        elif m := _CMP_OP.match(term):
            op = "NotIn" if m.group(2) == "!=" else "In"
            reqs.append(Requirement(m.group(1), op, frozenset({m.group(3)})))
        elif m := _EXISTS.match(term):
            reqs.append(Requirement(m.group(2), "DoesNotExist" if m.group(1) else "Exists"))
        else:
            raise errors.BadRequest(f"unable to parse requirement: {term.strip()!r}")
    return Selector(tuple(reqs))


def from_match_labels(match_labels: Mapping[str, str] | None) -> Selector:
    return Selector(
        tuple(Requirement(k, "In", frozenset({v})) for k, v in sorted((match_labels or {}).items()))
    )


def from_label_selector(selector: Any) -> Selector:
    """`metav1.LabelSelectorAsSelector` of a `meta_v1.LabelSelector` (matchLabels and
    matchExpressions; an empty one selects everything, as upstream)."""
    requirements = [
        Requirement(k, "In", frozenset({v})) for k, v in sorted(selector.match_labels.items())
    ]
    requirements += [
        Requirement(r.key, r.operator, frozenset(r.values)) for r in selector.match_expressions
    ]
    return Selector(tuple(requirements))


def parse_field_selector(text: str) -> dict[str, tuple[str, str]]:
    """`metadata.name=x,spec.nodeName!=` → {field: (op, value)} with op '=' or '!='."""
    out: dict[str, tuple[str, str]] = {}
    for term in _split(text or ""):
        m = _CMP_OP.match(term)
        if not m:
            raise errors.BadRequest(f"invalid field selector: {term.strip()!r}")
        out[m.group(1)] = ("!=" if m.group(2) == "!=" else "=", m.group(3))
    return out
