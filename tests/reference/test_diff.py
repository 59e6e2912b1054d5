"""reference.diff: differences, known divergences and the table, without any cluster."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reference import diff


def test_equal_observations_have_no_differences() -> None:
    obs = {"pod p": {"bound": True}}
    assert diff.compare("s", obs, obs) == []
    assert diff.render_table([]) == "no differences"


def test_differences_by_field_and_by_missing_item() -> None:
    ours = {"pod p": {"bound": True, "pool": "dra-gpu"}, "events": {"Pod Scheduled": "Normal"}}
    theirs = {"pod p": {"bound": True, "pool": "dp-gpu"}, "quota q": {"used.pods": "1"}}
    found = diff.compare("s", ours, theirs)
    assert [(d.item, d.field, d.drasim, d.upstream) for d in found] == [
        ("events", "*", "present", diff.ABSENT),
        ("pod p", "pool", "dra-gpu", "dp-gpu"),
        ("quota q", "*", diff.ABSENT, "present"),
    ]
    assert all(d.known is None for d in found)


def test_known_divergences_match_by_glob_and_show_their_note() -> None:
    known = [diff.KnownDivergence("kep-*", ("pod *",), ("pool",), "drasim prefers the other node")]
    found = diff.compare("kep-example", {"pod p": {"pool": "a"}}, {"pod p": {"pool": "b"}}, known)
    assert found[0].known is known[0]
    other = diff.compare("quota", {"pod p": {"pool": "a"}}, {"pod p": {"pool": "b"}}, known)
    assert other[0].known is None
    table = diff.render_table(found + other)
    assert "known" in table and "DIFF" in table
    assert "drasim prefers the other node" in table


def test_divergences_file_needs_notes(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text("- {item: 'pod *', field: pool}\n")
    with pytest.raises(ValueError, match="missing note"):
        diff.load_divergences(path)
    path.write_text('- {item: "pod *", field: pool, note: "  a\\n  note "}\n')
    assert diff.load_divergences(path) == [
        diff.KnownDivergence("*", ("pod *",), ("pool",), "a note")
    ]


def test_globs_take_brackets_literally_and_values_narrow_the_match() -> None:
    assert diff.glob("spec.containers[*].image").fullmatch("spec.containers[0].image")
    assert not diff.glob("spec.containers[*].image").fullmatch("spec.containers0.image")
    known = [
        diff.KnownDivergence(
            "*", ("pods of *",), ("pending message*",), "extra words", drasim="*still not*"
        )
    ]
    wrong_words = diff.compare("s", {"p": {"pending message[0]": "x still not y"}}, {"p": {}}, [])
    assert diff.compare(
        "s", {"pods of D": {"pending message[0]": "x still not y"}}, {"pods of D": {}}, known
    )[0].known
    assert wrong_words[0].known is None
    other = diff.compare(
        "s", {"pods of D": {"pending message[0]": "other"}}, {"pods of D": {}}, known
    )
    assert other[0].known is None


def test_the_projects_divergences_file_names_an_issue_for_each_entry() -> None:
    from reference.compare import DIVERGENCES

    entries = diff.load_divergences(DIVERGENCES)
    assert entries
    for entry in entries:
        assert re.search(r"#\d+", entry.note), f"no open issue named: {entry.note}"


def test_entries_no_difference_matched_are_unused() -> None:
    known = [
        diff.KnownDivergence("*", ("pod *",), ("pool",), "seen"),
        diff.KnownDivergence("*", ("quota *",), ("*",), "fixed since"),
    ]
    found = diff.compare("s", {"pod p": {"pool": "a"}}, {"pod p": {"pool": "b"}}, known)
    assert [d.known for d in found] == [known[0]]
    assert diff.unused(known, found) == [known[1]]
