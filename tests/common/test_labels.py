"""Label selector strings, parsed as apimachinery's `labels.Parse` parses them: what they
select, and the message a bad one is refused with."""

from __future__ import annotations

import pytest

from drasim.common import errors, labels

SELECTS = [
    # selector, labels, selected
    ("app=web", {"app": "web"}, True),
    ("app==web", {"app": "db"}, False),
    ("app!=web", {}, True),
    ("app", {"app": ""}, True),
    ("!app", {"app": "x"}, False),
    ("env in (a,b),tier notin (x)", {"env": "b", "tier": "y"}, True),
    # The empty value: `a=`, `a==` and `a in ()` all select a: "".
    ("a=", {"a": ""}, True),
    ("a==", {"a": "x"}, False),
    ("a==", {}, False),
    ("a in ()", {"a": ""}, True),
    ("a in ()", {"a": "x"}, False),
    ("a notin ()", {"a": "x"}, True),
    ("a notin ()", {"a": ""}, False),
    ("a in (b,,c)", {"a": ""}, True),
    ("in in (in, notin)", {"in": "notin"}, True),
    ("n>5", {"n": "6"}, True),
    ("n<5", {"n": "6"}, False),
    ("n>5", {"n": "x"}, False),
    ("", {"a": "b"}, True),
]


@pytest.mark.parametrize(("text", "have", "want"), SELECTS)
def test_selects(text: str, have: dict[str, str], want: bool) -> None:
    assert labels.parse(text).matches(have) is want


LONG = "k" * 64
REFUSED = [
    ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("a,", "found '', expected: identifier after ','"),
    (",a", "found ',', expected: !, identifier, or 'end of string'"),
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
    (f"{LONG}=b", f'unable to parse requirement: <nil>: Invalid value: "{LONG}": '
                  "name part must be no more than 63 characters"),
    (f"example.com/{LONG}", f'unable to parse requirement: <nil>: Invalid value: '
                            f'"example.com/{LONG}": name part must be no more than 63 characters'),
    (f"{'p' * 254}/a", "prefix part must be no more than 253 characters"),
    (f"a={'v' * 64}", f'unable to parse requirement: values[0][a]: Invalid value: "{"v" * 64}": '
                      "must be no more than 63 characters"),
    ("a in (x$, y$)", 'unable to parse requirement: [values[0][a]: Invalid value: "x$": '),
    ("n>x", 'unable to parse requirement: values[0]: Invalid value: "x": '
            "for 'Gt', 'Lt' operators, the value must be an integer"),
    # A NUL separates words inside a token (Go's lexer reads it as its end-of-input byte).
    ("a=b\0c", "found 'c', expected: ',' or 'end of string'"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), REFUSED, ids=[t[:20] for t, _ in REFUSED])
def test_refused(text: str, message: str) -> None:
    with pytest.raises(errors.BadRequest) as refused:
        labels.parse(text)
    assert message in refused.value.message
