"""The CEL parser: the tree cel-go's parser builds (operators as calls, balanced `&&`/`||`,
signs folded into literals, macros expanded), for the grammar of cel-go `CEL.g4`."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from drasim.common.cel_ast import (
    ACCUMULATOR,
    Call,
    CELSyntaxError,
    Comprehension,
    CreateList,
    CreateMap,
    CreateStruct,
    Expr,
    Ident,
    Literal,
    Select,
    parse,
)


def call(function: str, *args: Expr, target: Expr | None = None) -> Call:
    return Call(function, args, target)


def lit(value: Any, kind: str | None = None) -> Literal:
    if kind is None:
        kind = {bool: "bool", int: "int", float: "double", str: "string", bytes: "bytes"}.get(
            type(value), "null"
        )
    return Literal(kind, value)


A, B, C, D, X = Ident("a"), Ident("b"), Ident("c"), Ident("d"), Ident("x")
ACCU = Ident(ACCUMULATOR)

LITERALS = [
    ("42", lit(42)),
    ("-7", lit(-7)),
    ("-9223372036854775808", lit(-(2**63))),
    ("42u", lit(42, "uint")),
    ("18446744073709551615u", lit(2**64 - 1, "uint")),
    ("0x1F", lit(31)),
    ("0x1fU", lit(31, "uint")),
    ("3.5", lit(3.5)),
    ("1e3", lit(1000.0)),
    (".5", lit(0.5)),
    ("-2.5e-1", lit(-0.25)),
    ("true", lit(True)),
    ("false", lit(False)),
    ("null", lit(None)),
    ('"a\\tb"', lit("a\tb")),
    ("'single \"quoted\"'", lit('single "quoted"')),
    ('r"a\\nb"', lit("a\\nb")),
    ("R'\\d+'", lit("\\d+")),
    ('"""two\nlines"""', lit("two\nlines")),
    ("'''it's'''", lit("it's")),
    ('"\\x41\\101\\u00e9\\U0001F600"', lit("AAé😀")),
    ('"\\a\\b\\f\\n\\r\\v\\\\\\\'\\"\\`\\?"', lit("\a\b\f\n\r\v\\'\"`?")),
    ('"é"', lit("é")),
    ('"""crlf\r\n"""', lit("crlf\n")),
    ('b"\\xff\\000"', lit(b"\xff\x00")),
    ('b"é"', lit("é".encode())),
    ("B'abc'", lit(b"abc")),
    ('bR"\\n"', lit(b"\\n")),
]


@pytest.mark.parametrize(("text", "tree"), LITERALS, ids=[t for t, _ in LITERALS])
def test_literals(text: str, tree: Expr) -> None:
    assert parse(text) == tree


OPERATORS = [
    ("1 + 2 * 3", call("_+_", lit(1), call("_*_", lit(2), lit(3)))),
    ("a - b - c", call("_-_", call("_-_", A, B), C)),
    ("a / b % c", call("_%_", call("_/_", A, B), C)),
    ("a < b == c", call("_==_", call("_<_", A, B), C)),
    ("a <= b != c >= d", call("_>=_", call("_!=_", call("_<=_", A, B), C), D)),
    ("a > b", call("_>_", A, B)),
    ("x in [1]", call("@in", X, CreateList((lit(1),)))),
    ("a || b && c", call("_||_", A, call("_&&_", B, C))),
    # cel-go balances logical chains: ((a || b) || (c || d)), not (((a || b) || c) || d).
    ("a || b || c || d", call("_||_", call("_||_", A, B), call("_||_", C, D))),
    ("a && b && c", call("_&&_", call("_&&_", A, B), C)),
    ("!a && b", call("_&&_", call("!_", A), B)),
    ("!!a", A),
    ("!!!a", call("!_", A)),
    ("-a", call("-_", A)),
    ("--a", A),
    ("--1", lit(1)),
    ("-1 - -1", call("_-_", lit(-1), lit(-1))),
    ("a ? b : c ? d : x", call("_?_:_", A, B, call("_?_:_", C, D, X))),
    ("(a + b) * c", call("_*_", call("_+_", A, B), C)),
    ("a.b.c", Select(Select(A, "b"), "c")),
    ("a[0]['k']", call("_[_]", call("_[_]", A, lit(0)), lit("k"))),
    ("a.f(1, b)", call("f", lit(1), B, target=A)),
    ("f()", call("f")),
    ("size(a) > 0", call("_>_", call("size", A), lit(0))),
    (".a", Ident(".a")),
    (".f(a)", call(".f", A)),
    ("a.`b-c`", Select(A, "b-c")),
    ("a.as", Select(A, "as")),
    ("[]", CreateList()),
    ("[1, 2,]", CreateList((lit(1), lit(2)))),
    ("{}", CreateMap()),
    ('{"k": 1, 2: a,}', CreateMap(((lit("k"), lit(1)), (lit(2), A)))),
    ("pkg.Msg{f: 1, g: a}", CreateStruct("pkg.Msg", (("f", lit(1)), ("g", A)))),
    ("Msg{}", CreateStruct("Msg")),
    ("a // comment\n  + b", call("_+_", A, B)),
    # Wrong arity for a macro: an ordinary call.
    ("a.all(x)", call("all", X, target=A)),
    ("has(a.b, c)", call("has", Select(A, "b"), C)),
]


@pytest.mark.parametrize(("text", "tree"), OPERATORS, ids=[t for t, _ in OPERATORS])
def test_operators_and_members(text: str, tree: Expr) -> None:
    assert parse(text) == tree


def fold(var: str, macro: str, init: Expr, condition: Expr, step: Expr, result: Expr) -> Expr:
    return Comprehension(var, A, ACCUMULATOR, init, condition, step, result, macro=macro)


P, F = Ident("p"), Ident("f")
MACROS = [
    ("has(a.b)", Select(A, "b", test_only=True)),
    ("a.all(x, p)", fold("x", "all", lit(True), call("@not_strictly_false", ACCU),
                         call("_&&_", ACCU, P), ACCU)),
    ("a.exists(x, p)", fold("x", "exists", lit(False),
                            call("@not_strictly_false", call("!_", ACCU)),
                            call("_||_", ACCU, P), ACCU)),
    ("a.exists_one(x, p)", fold("x", "exists_one", lit(0), lit(True),
                                call("_?_:_", P, call("_+_", ACCU, lit(1)), ACCU),
                                call("_==_", ACCU, lit(1)))),
    ("a.map(x, f)", fold("x", "map", CreateList(), lit(True),
                         call("_+_", ACCU, CreateList((F,))), ACCU)),
    ("a.map(x, p, f)", fold("x", "map", CreateList(), lit(True),
                            call("_?_:_", P, call("_+_", ACCU, CreateList((F,))), ACCU), ACCU)),
    ("a.filter(x, p)", fold("x", "filter", CreateList(), lit(True),
                            call("_?_:_", P, call("_+_", ACCU, CreateList((X,))), ACCU), ACCU)),
]  # fmt: skip


@pytest.mark.parametrize(("text", "tree"), MACROS, ids=[t for t, _ in MACROS])
def test_macros_expand_as_cel_go_does(text: str, tree: Expr) -> None:
    assert parse(text) == tree


def test_a_dra_selector() -> None:
    device = Ident("device")
    assert parse(
        'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "X"'
    ) == call(
        "_&&_",
        call("_==_", Select(device, "driver"), lit("gpu.example.com")),
        call(
            "_==_",
            Select(call("_[_]", Select(device, "attributes"), lit("gpu.example.com")), "model"),
            lit("X"),
        ),
    )


def _ids(expr: Any) -> list[int]:
    if isinstance(expr, tuple):
        return [i for item in expr for i in _ids(item)]
    if not dataclasses.is_dataclass(expr):
        return []
    ids = [expr.id]  # type: ignore[union-attr]
    for f in dataclasses.fields(expr):
        if f.name != "id":
            ids += _ids(getattr(expr, f.name))
    return ids


def test_every_node_has_its_own_id() -> None:
    """Analyses keep facts per node (as cel-go per expression id): two equal subtrees are
    still two nodes."""
    ids = _ids(parse("[1, 1].all(x, x == 1) && [1].exists_one(x, x == 1) && {1: [1]}[1][0] == 1"))
    assert len(ids) == len(set(ids))
    assert 0 not in ids


REFUSED = [
    ("a +", "mismatched input '<EOF>'"),
    ("1 2", "extraneous input '2'"),
    ("f(1,)", "mismatched input ')'"),
    ("a.?b", "unsupported syntax '.?'"),
    ("a[?0]", "unsupported syntax '[?'"),
    ("[?a]", "unsupported syntax '?'"),
    ("{?1: 2}", "unsupported syntax '?'"),
    ('"unterminated', "unterminated string"),
    ("'one\nline'", "unterminated string"),
    ('"\\q"', "invalid escape sequence"),
    ('b"\\u00e9"', "invalid escape sequence"),
    ('"\\ud800"', "invalid unicode code point"),
    ("has(a)", "invalid argument to has() macro"),
    ("a.all(1, true)", "argument must be a simple name"),
    ("9223372036854775808", "invalid int literal"),
    ("18446744073709551616u", "invalid uint literal"),
    ("for", "reserved identifier: for"),
    ("a.in", "expecting IDENTIFIER"),
    ("a # b", "token recognition error at: '#'"),
    ("-!a", "mismatched input '!'"),
    ('rb"x"', "extraneous input"),  # raw bytes are `br`
]


@pytest.mark.parametrize(("text", "message"), REFUSED, ids=[t for t, _ in REFUSED])
def test_refuses(text: str, message: str) -> None:
    with pytest.raises(CELSyntaxError, match=re.escape(message)):
        parse(text)
