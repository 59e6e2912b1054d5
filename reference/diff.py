"""Differences between drasim's and upstream's observations, known divergences, tables.

Pure code (tested in CI without Go). A difference is one field of one item whose values
differ, or that only one side has. A difference matching an entry of the known divergences
(`reference/divergences.yaml`) is reported as known, with its note, and does not fail the
scenario; every other difference does. Upstream is the oracle: a known divergence is a
drasim bug (or an emulation limit) someone wrote down, not a matter of taste.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reference.normalize import Observation

__all__ = [
    "ABSENT",
    "glob",
    "Difference",
    "KnownDivergence",
    "compare",
    "load_divergences",
    "render_table",
    "unused",
]

ABSENT = "(absent)"


def glob(pattern: str) -> re.Pattern[str]:
    """A pattern where only `*` is special (any text): field paths are full of brackets
    and dots, which fnmatch would read as character classes."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


@dataclass(frozen=True)
class KnownDivergence:
    """A difference drasim is known to have. Each of scenario, items and fields is a
    pattern (or several, any of which may match) where `*` is any text; `drasim` and
    `upstream`, when given, must match that side's value too (as text), so that a known
    wrong message does not hide a wrong count."""

    scenario: str
    items: tuple[str, ...]
    fields: tuple[str, ...]
    note: str
    drasim: str | None = None
    upstream: str | None = None

    def matches(self, difference: Difference) -> bool:
        def text(value: Any) -> str:
            return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

        return (
            glob(self.scenario).fullmatch(difference.scenario) is not None
            and any(glob(p).fullmatch(difference.item) for p in self.items)
            and any(glob(p).fullmatch(difference.field) for p in self.fields)
            and (self.drasim is None or glob(self.drasim).fullmatch(text(difference.drasim)))
            and (
                self.upstream is None
                or glob(self.upstream).fullmatch(text(difference.upstream)) is not None
            )
        )


@dataclass(frozen=True)
class Difference:
    scenario: str
    item: str
    field: str
    drasim: Any
    upstream: Any
    known: KnownDivergence | None = None


def load_divergences(path: Path) -> list[KnownDivergence]:
    """The known divergences file: a list of {scenario, item(s), field(s), note, and
    optionally drasim, upstream}; every entry needs a note, since an unexplained exception
    is only a hidden failure."""
    entries = yaml.safe_load(path.read_text()) or []
    found = []
    for i, entry in enumerate(entries):
        missing = [k for k in ("item", "field", "note") if not (entry.get(k) or entry.get(k + "s"))]
        if missing:
            raise ValueError(f"{path}: entry {i}: missing {', '.join(missing)}")

        def patterns(key: str, entry: dict[str, Any] = entry) -> tuple[str, ...]:
            value = entry.get(key + "s", entry.get(key))
            return tuple(str(v) for v in (value if isinstance(value, list) else [value]))

        found.append(
            KnownDivergence(
                scenario=str(entry.get("scenario") or "*"),
                items=patterns("item"),
                fields=patterns("field"),
                note=" ".join(str(entry["note"]).split()),
                drasim=None if entry.get("drasim") is None else str(entry["drasim"]),
                upstream=None if entry.get("upstream") is None else str(entry["upstream"]),
            )
        )
    return found


def compare(
    scenario: str,
    drasim: Observation,
    upstream: Observation,
    known: Sequence[KnownDivergence] = (),
) -> list[Difference]:
    """Every differing field, in item and field order, each marked known or not."""
    found = []
    for item in sorted(set(drasim) | set(upstream)):
        ours, theirs = drasim.get(item), upstream.get(item)
        if ours is None or theirs is None:
            pairs = [
                (
                    "*",
                    ABSENT if ours is None else "present",
                    ABSENT if theirs is None else "present",
                )
            ]
        else:
            pairs = [
                (field, ours.get(field, ABSENT), theirs.get(field, ABSENT))
                for field in sorted(set(ours) | set(theirs))
                if ours.get(field, ABSENT) != theirs.get(field, ABSENT)
            ]
        for field, a, b in pairs:
            difference = Difference(scenario, item, field, a, b)
            match = next((k for k in known if k.matches(difference)), None)
            found.append(dataclasses.replace(difference, known=match))
    return found


def unused(
    known: Sequence[KnownDivergence], differences: Iterable[Difference]
) -> list[KnownDivergence]:
    """The known divergences no difference matched: after a run of every scenario, bugs
    fixed since they were written down, whose entries can go."""
    matched = {d.known for d in differences if d.known is not None}
    return [k for k in known if k not in matched]


def _cell(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(differences: Iterable[Difference], *, width: int = 60) -> str:
    """One row per difference: item, field, drasim, upstream, and the note when known."""
    rows = [("", "item", "field", "drasim", "upstream")]
    notes = []
    for d in differences:
        mark = "known" if d.known else "DIFF"
        rows.append(
            (
                mark,
                _cell(d.item, 40),
                _cell(d.field, 48),
                _cell(d.drasim, width),
                _cell(d.upstream, width),
            )
        )
        if d.known:
            notes.append(f"  known: {d.item} {d.field}: {d.known.note}")
    if len(rows) == 1:
        return "no differences"
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + sorted(set(notes)))
