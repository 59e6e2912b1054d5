"""Kubernetes label selectors (`app=x,tier!=y,env in (a,b),!legacy`) parsed once, matched often.

`parse` follows apimachinery's `labels.Parse`: the same lexer, grammar and error messages,
the same checks of keys (qualified names) and values (label values), so a selector means
what it means to kube-apiserver and a bad one is refused with its words. The two spellings
upstream accepts for an empty value mean it too: `a=` and `a in ()` select `a: ""`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drasim.common import errors
from drasim.common.api.validation import names

_CMP_OP = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator in ("Gt", "Lt"):
            return self._compares(labels.get(self.key))
        return self.key not in labels or labels[self.key] not in self.values

    def _compares(self, value: str | None) -> bool:
        """`Gt`/`Lt`: the label and the one value read as int64; either not one: no match."""
        try:
            (bound,) = self.values
            have, want = _int64(value), _int64(bound)
        except ValueError:
            return False
        return have > want if self.operator == "Gt" else have < want


def _int64(text: str | None) -> int:
    """Go's `strconv.ParseInt(text, 10, 64)`: an optional sign and decimal digits."""
    if text is None or not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(text)
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(text)
    return value


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements


# --- Lexer (apimachinery `labels.Lexer`) ------------------------------------------------------

_IDENTIFIER, _END = "identifier", "end"
# Tokens by their text; anything else is an identifier (keys and values).
_TOKENS = {
    ")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": ">", "in": "in", "<": "<",
    "!=": "!=", "notin": "notin", "(": "(",
}  # fmt: skip
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"
_OPERATORS = {
    "in": "In",
    "notin": "NotIn",
    "=": "In",
    "==": "In",
    "!=": "NotIn",
    ">": "Gt",
    "<": "Lt",
}


def _lex(text: str) -> list[tuple[str, str]]:
    """(token, literal) pairs ending with the end token, as upstream's lexer reads them:
    special symbols join into the longest operator they spell (`!=`, `==`), and a NUL reads
    as Go's end-of-input byte (the end where a token would start, else a separator)."""
    items: list[tuple[str, str]] = []
    pos, size = 0, len(text)

    def read() -> str:
        nonlocal pos
        if pos == size:
            return "\0"
        pos += 1
        return text[pos - 1]

    while True:
        ch = read()
        while ch in _WHITESPACE:
            ch = read()
        if ch == "\0":
            items.append((_END, ""))
            return items
        pos -= 1
        literal = ""
        if ch in _SPECIAL:
            token = ""
            while (ch := read()) != "\0":
                if ch not in _SPECIAL:
                    pos -= 1
                    break
                literal += ch
                if literal in _TOKENS:
                    token = literal
                elif token:
                    pos -= 1
                    break
            items.append((_TOKENS[token], token))
            continue
        while (ch := read()) != "\0":
            if ch in _SPECIAL or ch in _WHITESPACE:
                pos -= 1
                break
            literal += ch
        items.append((_TOKENS.get(literal, _IDENTIFIER), literal))


# --- Parser (apimachinery `labels.Parser`) ----------------------------------------------------


class _ParseError(Exception):
    pass


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, *, values: bool = True) -> tuple[str, str]:
        return self._as(self.items[self.position], values)

    def consume(self, *, values: bool = True) -> tuple[str, str]:
        self.position += 1
        return self._as(self.items[self.position - 1], values)

    @staticmethod
    def _as(item: tuple[str, str], values: bool) -> tuple[str, str]:
        # Where values are expected, `in` and `notin` are values like any other word.
        token, literal = item
        if values and token in ("in", "notin"):
            return _IDENTIFIER, literal
        return token, literal

    def parse(self) -> list[Requirement]:
        requirements = []
        while True:
            token, literal = self.lookahead()
            if token == _END:
                return requirements
            if token not in (_IDENTIFIER, "!"):
                raise _ParseError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except _ParseError as err:
                raise _ParseError(f"unable to parse requirement: {err}") from None
            token, literal = self.consume()
            if token == _END:
                return requirements
            if token != ",":
                raise _ParseError(f"found '{literal}', expected: ',' or 'end of string'")
            token, literal = self.lookahead()
            if token not in (_IDENTIFIER, "!"):
                raise _ParseError(f"found '{literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        negated = self.lookahead()[0] == "!"
        if negated:
            self.consume()
        token, key = self.consume()
        if token != _IDENTIFIER:
            raise _ParseError(f"found '{key}', expected: identifier")
        if problems := names.is_qualified_name(key):
            raise _ParseError(f"<nil>: {_invalid(key, '; '.join(problems))}")
        if negated or self.lookahead()[0] in (_END, ","):
            return _requirement(key, "DoesNotExist" if negated else "Exists", [])
        token, literal = self.consume(values=False)
        operator = _OPERATORS.get(token)
        if operator is None:
            raise _ParseError(f"found '{literal}', expected: {_BINARY_OPERATORS}")
        values = self.values() if token in ("in", "notin") else self.exact_value()
        return _requirement(key, operator, sorted(values))

    def values(self) -> set[str]:
        """`(a,b,c)`; empty entries are the empty value, so `()` is `("")`."""
        token, literal = self.consume()
        if token != "(":
            raise _ParseError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead()
        if token == ")":
            self.consume()
            return {""}
        if token not in (_IDENTIFIER, ","):
            raise _ParseError(f"found '{literal}', expected: ',', ')' or identifier")
        found = self.identifiers()
        if self.consume()[0] != ")":
            raise _ParseError(f"found '{literal}', expected: ')'")
        return found

    def identifiers(self) -> set[str]:
        found: set[str] = set()
        while True:
            token, literal = self.consume()
            if token == _IDENTIFIER:
                found.add(literal)
                after, after_literal = self.lookahead()
                if after == ",":
                    continue
                if after == ")":
                    return found
                raise _ParseError(f"found '{after_literal}', expected: ',' or ')'")
            if token != ",":
                raise _ParseError(f"found '{literal}', expected: ',', or identifier")
            if not found:
                found.add("")  # `(,`
            if self.lookahead()[0] in (")", ","):
                found.add("")  # `,)` and `,,`
                if self.lookahead()[0] == ")":
                    return found

    def exact_value(self) -> set[str]:
        if self.lookahead()[0] in (_END, ","):
            return {""}  # `a=` selects the empty value
        token, literal = self.consume()
        if token != _IDENTIFIER:
            raise _ParseError(f"found '{literal}', expected: identifier")
        return {literal}


def _invalid(value: str, detail: str) -> str:
    return errors.field_invalid("", value, detail).message


def _requirement(key: str, operator: str, values: list[str]) -> Requirement:
    """Upstream `NewRequirement`'s checks of what the grammar let through: Gt/Lt take one
    integer, and every value is a label value (paths `values[i][key]`, values sorted)."""
    problems = []
    if operator in ("Gt", "Lt"):
        for i, value in enumerate(values):
            try:
                _int64(value)
            except ValueError:
                problems.append(
                    f"values[{i}]: "
                    + _invalid(value, "for 'Gt', 'Lt' operators, the value must be an integer")
                )
    for i, value in enumerate(values):
        if bad := names.is_valid_label_value(value):
            problems.append(f"values[{i}][{key}]: {_invalid(value, '; '.join(bad))}")
    if len(problems) == 1:
        raise _ParseError(problems[0])
    if problems:
        raise _ParseError(f"[{', '.join(problems)}]")
    return Requirement(key, operator, frozenset(values))


def parse(text: str) -> Selector:
    """Parse a label selector string; a bad one is a 400 with upstream's message."""
    try:
        requirements = _Parser(text or "").parse()
    except _ParseError as err:
        raise errors.BadRequest(str(err)) from None
    return Selector(tuple(sorted(requirements, key=lambda r: r.key)))


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


def parse_field_selector(text: str) -> dict[str, tuple[str, str]]:
    """`metadata.name=x,spec.nodeName!=` → {field: (op, value)} with op '=' or '!='."""
    out: dict[str, tuple[str, str]] = {}
    for term in _split(text or ""):
        m = _CMP_OP.match(term)
        if not m:
            raise errors.BadRequest(f"invalid field selector: {term.strip()!r}")
        out[m.group(1)] = ("!=" if m.group(2) == "!=" else "=", m.group(3))
    return out
