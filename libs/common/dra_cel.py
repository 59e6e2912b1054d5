"""Compiling DRA device selector expressions, as upstream's `dynamic-resource-allocation/cel`
compiler does, for both sides that need it: admission (`api.validation` refuses a
DeviceClass or claim whose selector does not compile, as the API server does) and the
scheduler's CEL environment (`drasim.scheduler.plugins.dynamic_resources.cel_env`), so an
expression the API accepts is one the scheduler can run, and a refusal reads the same in
both places.

The `cel` package parses and evaluates but has no type checker and no cost estimator. What
upstream's checker refuses and can be told without one is refused here with upstream's words:

- syntax errors: `compilation failed: ERROR: <input>:1:17: Syntax error: ...`;
- a name other than `device` and those bound by macros (`all`, `exists`, `exists_one`,
  `map`, `filter`): `undeclared reference to 'x' (in container '')`;
- a field of `device` other than `driver`, `attributes`, `capacity` and
  `allowMultipleAllocations`: `undefined field 'x'`;
- a function neither CEL nor Kubernetes' CEL library declares:
  `undeclared reference to 'f' (in container '')`;
- a result whose type is known without a device and is not bool (see `_probe`):
  `must evaluate to bool or the unknown type, not string`.

Upstream-valid expressions the scheduler cannot evaluate (Kubernetes library functions drasim
lacks, `cel.bind`, the optional syntax `.?`) are refused too, naming what is missing: accepted,
every pod needing the class would stay Pending with the same error. Not checked: operand types
(`"a" + 1` fails when evaluated).

With `cost_limit` (admission passes `SELECTOR_EXPRESSION_MAX_COST`, upstream's
`CELSelectorExpressionMaxCost`), an expression that compiles is also refused when its
estimated worst-case cost exceeds the limit, with upstream's words, `too complex, exceeds
cost limit` (`CostLimitExceeded`, which admission reports as Forbidden where other refusals
are Invalid). The estimate is upstream's (`drasim.common.cel_cost`, on the syntax tree of
`drasim.common.cel_ast`, since the `cel` package exposes none). The scheduler compiles
without a limit, as upstream's scheduler compiles with cost estimation disabled: a stored
selector is evaluated whatever its estimate.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import logging
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import cel

from drasim.common import cel_ast, cel_cost

__all__ = [
    "DEVICE_FIELDS",
    "LIBRARY_FUNCTIONS",
    "SELECTOR_EXPRESSION_MAX_COST",
    "SELECTOR_EXPRESSION_MAX_LENGTH",
    "CompileError",
    "CostLimitExceeded",
    "compile_expression",
    "max_cost",
]

log = logging.getLogger(__name__)

# resource.k8s.io `CELSelectorExpressionMaxLength` (bytes) and `CELSelectorExpressionMaxCost`
# (CEL cost units, compared with the estimated worst case).
SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
SELECTOR_EXPRESSION_MAX_COST = 1_000_000

DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})

# Kubernetes' quantity and semver library functions and the ASCII case functions of its
# strings library, as the scheduler's environment implements them (`cel_env._FUNCTIONS`
# must name exactly these).
LIBRARY_FUNCTIONS = frozenset(
    {
        "quantity", "isQuantity", "compareTo", "isGreaterThan", "isLessThan", "add", "sub",
        "sign", "isInteger", "asInteger", "asApproximateFloat",
        "semver", "isSemver", "major", "minor", "patch", "lowerAscii", "upperAscii",
    }
)  # fmt: skip
# CEL's standard functions that the `cel` package evaluates natively.
_NATIVE_FUNCTIONS = frozenset(
    {
        "size", "contains", "startsWith", "endsWith", "matches",
        "int", "uint", "double", "string", "bytes", "type", "dyn", "duration", "timestamp",
        "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours",
        "getMilliseconds", "getMinutes", "getMonth", "getSeconds",
    }
)  # fmt: skip
# Declared by CEL or by Kubernetes' CEL environment (strings, lists, regex, URL, IP, CIDR,
# format, image libraries; two-variable comprehensions) but not evaluated by drasim.
_UPSTREAM_ONLY_FUNCTIONS = frozenset(
    {
        "bool", "charAt", "indexOf", "lastIndexOf", "replace",
        "split", "substring", "trim", "join", "format", "quote", "reverse",
        "isSorted", "sum", "min", "max", "find", "findAll",
        "url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath",
        "getQuery", "ip", "isIP", "isCanonical", "family", "isUnspecified", "isLoopback",
        "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast", "cidr", "isCIDR",
        "containsIP", "containsCIDR", "prefixLength", "masked", "validate",
        "image", "isImage", "containsDigest", "registry", "repository", "identifier", "tag",
        "digest", "hasValue", "value", "orValue", "or", "all", "exists", "exists_one",
        "existsOne", "transformList", "transformMap", "transformMapEntry",
    }
)  # fmt: skip
# Namespaces of functions Kubernetes' CEL environment has (`cel.bind`, `sets.contains`, ...).
_UPSTREAM_ONLY_NAMESPACES = frozenset({"cel", "optional", "sets", "strings", "format"})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_DEVICE = "device"


class CompileError(Exception):
    """An expression upstream's compiler refuses (or drasim cannot evaluate); the message is
    the detail of the field error, as upstream's `CompilationResult.Error.Detail`."""


class CostLimitExceeded(CompileError):
    """An expression that compiles but whose estimated worst-case cost exceeds the limit
    (upstream `validateCELSelector`: `field.Forbidden`, not `field.Invalid`)."""

    def __init__(self) -> None:
        super().__init__("too complex, exceeds cost limit")


def compile_expression(expression: str, *, cost_limit: int | None = None) -> cel.Program:
    """The compiled expression, or `CompileError`; with `cost_limit`, `CostLimitExceeded`
    when the estimated worst-case cost is above it. Answers are remembered: a cluster has
    few distinct selectors, and every claim made from a template brings its selectors
    again."""
    result = _compile(expression)
    if isinstance(result, CompileError):
        raise result
    if cost_limit is not None:
        cost = max_cost(expression)
        if cost is not None and cost > cost_limit:
            raise CostLimitExceeded()
    return result


@functools.lru_cache(maxsize=1024)
def max_cost(expression: str) -> int | None:
    """Upstream's estimate of the worst-case cost of evaluating `expression` (which must
    compile) for any device (`CompilationResult.MaxCost`), or None (logged) for one
    `cel_ast` cannot parse: admission then accepts what the `cel` package accepts."""
    try:
        with _deep_recursion():
            return cel_cost.estimate_max_cost(cel_ast.parse(expression))
    except (cel_ast.CELSyntaxError, RecursionError) as err:
        log.warning("no cost estimate for CEL expression %.200r: %s", expression, err)
        return None


# Syntax trees nest as deep as the expression is long: a chain of `+` nests to the left (the
# `cel` package accepts 2,500 terms in 10 KiB), and each parenthesis is ten parser frames.
# That is deeper than Python's default recursion limit of 1,000; Python 3.11 runs Python
# calls without growing the C stack, so a higher limit while parsing and estimating is safe.
_RECURSION_LIMIT = 50_000
_recursion_lock = threading.Lock()


@contextlib.contextmanager
def _deep_recursion() -> Iterator[None]:
    with _recursion_lock:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
        try:
            yield
        finally:
            sys.setrecursionlimit(limit)


@functools.lru_cache(maxsize=1024)
def _compile(expression: str) -> cel.Program | CompileError:
    try:
        program = cel.compile(expression)
    except Exception as err:  # the cel package raises ValueError, but may raise others
        return CompileError(f"compilation failed: {_syntax_error(expression, err)}")
    tokens = list(_tokens(expression))
    problem = _check_references(expression, tokens, program) or _check_result_type(
        expression, tokens, program
    )
    return program if problem is None else CompileError(problem)


def _syntax_error(expression: str, err: Exception) -> str:
    """The parser's report in cel-go's layout (`ERROR: <input>:l:c: ...` and the source
    line with a caret under the spot), without the package's own preamble."""
    text = str(err).removeprefix(f"Failed to parse expression '{expression}': ")
    return text.replace("\n| ", "\n | ")


# --- Tokens: just enough lexing to find names, their places and macro-bound variables ------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "name", "string", "number" or "punct"
    text: str
    offset: int


_TOKEN = re.compile(
    r"""
    (?P<string>
        (?:[rR][bB]?|[bB][rR])(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n]*"|'[^'\n]*')
      | [bB]?(?:\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''
               |"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
    )
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[uU]?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>\S)
    """,
    re.VERBOSE,
)


def _tokens(expression: str) -> Iterator[_Token]:
    for match in _TOKEN.finditer(expression):
        kind = match.lastgroup
        assert kind is not None
        yield _Token(kind, match.group(), match.start())


def _is(tokens: list[_Token], i: int, text: str) -> bool:
    return 0 <= i < len(tokens) and tokens[i].text == text


def _bound_names(tokens: list[_Token]) -> set[str]:
    """Variables macros bind: the `x` of `e.all(x, p)`, `e.map(x, f)`, ..."""
    bound = set()
    for i, token in enumerate(tokens):
        if (
            token.text in _MACROS
            and _is(tokens, i - 1, ".")
            and _is(tokens, i + 1, "(")
            and i + 2 < len(tokens)
            and tokens[i + 2].kind == "name"
            and _is(tokens, i + 3, ",")
        ):
            bound.add(tokens[i + 2].text)
    return bound


def _first(tokens: list[_Token], name: str, *, call: bool | None = None) -> _Token | None:
    """Where `name` first stands as an identifier of its own (not after a '.'); `call`
    narrows to calls (followed by '(') or to anything else."""
    for i, token in enumerate(tokens):
        if token.kind != "name" or token.text != name or _is(tokens, i - 1, "."):
            continue
        if call is None or _is(tokens, i + 1, "(") == call:
            return token
    return None


def _at(expression: str, token: _Token | None, message: str) -> str:
    """`ERROR: <input>:line:column: message` and the line with a caret, as cel-go's
    `Issues.String()` renders one issue."""
    offset = token.offset if token is not None else 0
    line_start = expression.rfind("\n", 0, offset) + 1
    line_end = expression.find("\n", offset)
    line = expression[line_start : line_end if line_end >= 0 else len(expression)]
    line_no = expression.count("\n", 0, offset) + 1
    column = offset - line_start
    return f"ERROR: <input>:{line_no}:{column + 1}: {message}\n | {line}\n | {'.' * column}^"


# --- Checks --------------------------------------------------------------------------------


def _check_references(expression: str, tokens: list[_Token], program: cel.Program) -> str | None:
    bound = _bound_names(tokens)
    for name in _in_order(tokens, set(program.variables()) - bound - {_DEVICE}):
        token = _first(tokens, name, call=False) or _first(tokens, name)
        if name in _UPSTREAM_ONLY_NAMESPACES:
            return _unsupported(expression, tokens, token, name)
        return "compilation failed: " + _at(
            expression, token, f"undeclared reference to '{name}' (in container '')"
        )
    for i, token in enumerate(tokens):
        if (
            token.text == _DEVICE
            and not _is(tokens, i - 1, ".")
            and _is(tokens, i + 1, ".")
            and i + 2 < len(tokens)
            and tokens[i + 2].text not in DEVICE_FIELDS
            and _DEVICE not in bound
        ):
            field = tokens[i + 2].text
            return "compilation failed: " + _at(
                expression, tokens[i + 1], f"undefined field '{field}'"
            )
    known = _NATIVE_FUNCTIONS | LIBRARY_FUNCTIONS
    functions = {f for f in program.functions() if f.isidentifier() and f not in known}
    for name in _in_order(tokens, functions):
        token = _first(tokens, name, call=True) or _call_token(tokens, name)
        if name in _UPSTREAM_ONLY_FUNCTIONS:
            return _unsupported(expression, tokens, token, name)
        return "compilation failed: " + _at(
            expression, token, f"undeclared reference to '{name}' (in container '')"
        )
    return None


def _in_order(tokens: list[_Token], names: set[str]) -> list[str]:
    """`names` in the order they first appear (so the first problem is the one reported)."""
    order = {t.text: t.offset for t in reversed(tokens) if t.kind == "name"}
    return sorted(names, key=lambda n: order.get(n, 0))


def _call_token(tokens: list[_Token], name: str) -> _Token | None:
    """A method call `x.name(`."""
    for i, token in enumerate(tokens):
        if token.text == name and _is(tokens, i - 1, ".") and _is(tokens, i + 1, "("):
            return token
    return None


def _unsupported(expression: str, tokens: list[_Token], token: _Token | None, name: str) -> str:
    shown = name
    if name in _UPSTREAM_ONLY_NAMESPACES and token is not None:
        i = tokens.index(token)
        if _is(tokens, i + 1, ".") and i + 2 < len(tokens):
            shown = f"{name}.{tokens[i + 2].text}"
    return "compilation failed: " + _at(
        expression,
        token,
        f"'{shown}' is part of Kubernetes' CEL environment but not supported by drasim",
    )


# The `device` of a device with no attributes or capacity, for `_probe`.
_PROBE = cel.Context(
    variables={
        _DEVICE: {"driver": "", "attributes": {}, "capacity": {}, "allowMultipleAllocations": False}
    }
)


_NO_ANSWER = object()


def _check_result_type(expression: str, tokens: list[_Token], program: cel.Program) -> str | None:
    """Upstream's checker refuses an expression whose type is neither bool nor dyn. Without
    a checker, the type shows where `_probe` can tell it."""
    value = _probe(tokens, program)
    if value is _NO_ANSWER or type(value) is bool:
        return None
    return f"must evaluate to bool or the unknown type, not {_type_name(value)}"


def _probe(tokens: list[_Token], program: cel.Program) -> Any:
    """The expression's value for a device without attributes or capacity, where that
    value's type is the expression's static type; else `_NO_ANSWER`.

    Attribute values are dyn (any type passes the checker) and `dyn()`/`type()` hide types,
    so expressions using them are not probed; library functions are not in the probe's
    environment and capacity lookups fail, so those end the probe unanswered. Macros are
    never probed: with comprehensions an expression's cost is no longer linear in its
    length, and admission must not run unbounded work."""
    names = {t.text for t in tokens if t.kind == "name"}
    if names & {"attributes", "dyn", "type"} or names & _MACROS:
        return _NO_ANSWER
    try:
        return program.execute(_PROBE)
    except Exception:  # an evaluation error, a missing key, a library function
        return _NO_ANSWER


def _type_name(value: Any) -> str:
    """cel-go's name for the type of a value the probe returned."""
    match value:
        case bool():
            return "bool"
        case int():
            return "int"
        case float():
            return "double"
        case str():
            return "string"
        case bytes():
            return "bytes"
        case None:
            return "null_type"
        case datetime.timedelta():
            return "google.protobuf.Duration"
        case datetime.datetime():
            return "google.protobuf.Timestamp"
        case list():
            return f"list({_common_type(value)})"
        case dict():
            return f"map({_common_type(list(value))}, {_common_type(list(value.values()))})"
    return "dyn"


def _common_type(values: list[Any]) -> str:
    names = {_type_name(v) for v in values}
    return names.pop() if len(names) == 1 else "dyn"
