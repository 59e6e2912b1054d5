"""A CEL parser producing the syntax tree cel-go's parser produces, for analyses the `cel`
package cannot make because it exposes no tree (`drasim.common.cel_cost` estimates costs on
it).

The tree is cel-go's (`common/ast`), after its parser's rewrites, because cel-go's analyses
are defined on that tree:

- operators are calls named as cel-go names them (`_+_`, `_==_`, `@in`, `!_`, `-_`,
  `_?_:_`, `_[_]`);
- `&&` and `||` chains become balanced trees, as cel-go's parser balances them;
- an even run of `!` or `-` before an operand disappears, an odd run is one call;
  `-` directly before a number is the literal's sign (`-1` is a literal, `-x` a call);
- macros are expanded: `has(a.f)` is a presence test (`Select(test_only=True)`), and
  `all`, `exists`, `exists_one`, `map` (two or three arguments) and `filter` become
  `Comprehension`s with cel-go's accumulator, initial value, condition, step and result.

The grammar is the CEL specification's (cel-go `parser/gen/CEL.g4`, its tokens read by
`drasim.common.cel_lexer`): int, uint, double, string and bytes literals (quoted with ' or
", triple-quoted, raw with an `r` prefix, bytes with `b`, raw bytes with `br`; escapes
`\\n`, `\\x41`, `\\u00e9`, `\\101`, ...), lists, maps, messages (`a.B{f: 1}`), member access
(also `` a.`b-c` ``), index, global and receiver calls, and `in`. The optional syntax
(`.?f`, `[?i]`, `{?k: v}`) is refused: drasim's selectors refuse it before anything is
parsed here. Nodes compare by structure; `id` (unique within one parse, as cel-go's
expression ids) does not take part, so tests can write the expected tree without ids.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from drasim.common import cel_lexer
from drasim.common.cel_lexer import CELSyntaxError

__all__ = [
    "ACCUMULATOR",
    "CELSyntaxError",
    "Call",
    "Comprehension",
    "CreateList",
    "CreateMap",
    "CreateStruct",
    "Expr",
    "Ident",
    "Literal",
    "Select",
    "parse",
]

# cel-go's `parser.HiddenAccumulatorName`: no identifier can be spelled like it.
ACCUMULATOR = "@result"


# --- Nodes ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    """`kind` is "int", "uint", "double", "string", "bytes", "bool" or "null"."""

    kind: str
    value: int | float | str | bytes | bool | None
    id: int = dataclasses.field(default=0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Ident:
    name: str
    id: int = dataclasses.field(default=0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Select:
    """`operand.field`, or `has(operand.field)` when `test_only`."""

    operand: Expr
    field: str
    test_only: bool = False
    id: int = dataclasses.field(default=0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Call:
    """A function or operator call; `target` is the receiver of `target.function(args)`."""

    function: str
    args: tuple[Expr, ...] = ()
    target: Expr | None = None
    id: int = dataclasses.field(default=0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CreateList:
    elements: tuple[Expr, ...] = ()
    id: int = dataclasses.field(default=0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CreateMap:
    entries: tuple[tuple[Expr, Expr], ...] = ()
    id: int = dataclasses.field(default=0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CreateStruct:
    """A message literal `pkg.Name{field: value}`."""

    type_name: str
    fields: tuple[tuple[str, Expr], ...] = ()
    id: int = dataclasses.field(default=0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Comprehension:
    """A fold, as cel-go expands macros: `accu_var = accu_init`, then for each element
    `iter_var` of `iter_range`, while `loop_condition`, `accu_var = loop_step`; the value is
    `result`. `macro` names the macro it came from (for reading; analyses ignore it)."""

    iter_var: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_condition: Expr
    loop_step: Expr
    result: Expr
    macro: str = ""
    id: int = dataclasses.field(default=0, compare=False, repr=False)


Expr = Literal | Ident | Select | Call | CreateList | CreateMap | CreateStruct | Comprehension


# --- Parser --------------------------------------------------------------------------------

_RELATIONS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}
_ADDITIONS = {"+": "_+_", "-": "_-_"}
_MULTIPLICATIONS = {"*": "_*_", "/": "_/_", "%": "_%_"}
_QUANTIFIERS = frozenset({"all", "exists", "exists_one"})


def parse(expression: str) -> Expr:
    """The syntax tree of `expression`, or `CELSyntaxError`."""
    return _Parser(expression).parse()


class _Parser:
    def __init__(self, expression: str) -> None:
        self._tokens = list(cel_lexer.tokens(expression))
        self._pos = 0
        self._ids = itertools.count(1)

    # Tokens

    def _peek(self, ahead: int = 0) -> cel_lexer.Token:
        return self._tokens[min(self._pos + ahead, len(self._tokens) - 1)]

    def _at(self, text: str) -> bool:
        token = self._peek()
        return token.kind in ("punct", "ident") and token.text == text

    def _take(self) -> cel_lexer.Token:
        token = self._peek()
        self._pos += 1
        return token

    def _expect(self, text: str) -> cel_lexer.Token:
        if not self._at(text):
            raise self._fail(f"mismatched input '{self._peek().text}' expecting '{text}'")
        return self._take()

    def _fail(self, message: str | None = None) -> CELSyntaxError:
        token = self._peek()
        return CELSyntaxError(message or f"mismatched input '{token.text}'", token.offset)

    def _id(self) -> int:
        return next(self._ids)

    # Grammar, top down (cel-go `CEL.g4`)

    def parse(self) -> Expr:
        expr = self._expr()
        if self._peek().kind != "end":
            raise self._fail(f"extraneous input '{self._peek().text}' expecting <EOF>")
        return expr

    def _expr(self) -> Expr:
        condition = self._logical("||", "_||_", self._conditional_and)
        if not self._at("?"):
            return condition
        self._take()
        if_true = self._logical("||", "_||_", self._conditional_and)
        self._expect(":")
        if_false = self._expr()
        return self._call("_?_:_", condition, if_true, if_false)

    def _conditional_and(self) -> Expr:
        return self._logical("&&", "_&&_", self._relation)

    def _logical(self, op: str, function: str, operand: Callable[[], Expr]) -> Expr:
        terms = [operand()]
        while self._at(op):
            self._take()
            terms.append(operand())
        return self._balanced(function, terms, 0, len(terms) - 2)

    def _balanced(self, function: str, terms: list[Expr], lo: int, hi: int) -> Expr:
        """cel-go's `logicManager.balancedTree`: operator `mid` joins the terms around it."""
        if hi < lo:
            return terms[0]
        mid = (lo + hi + 1) // 2
        left = terms[mid] if mid == lo else self._balanced(function, terms, lo, mid - 1)
        right = terms[mid + 1] if mid == hi else self._balanced(function, terms, mid + 1, hi)
        return self._call(function, left, right)

    def _relation(self) -> Expr:
        expr = self._addition()
        while True:
            token = self._peek()
            if token.kind == "punct" and token.text in _RELATIONS:
                function = _RELATIONS[token.text]
            elif token.kind == "ident" and token.text == "in":
                function = "@in"
            else:
                return expr
            self._take()
            expr = self._call(function, expr, self._addition())

    def _addition(self) -> Expr:
        expr = self._multiplication()
        while self._peek().kind == "punct" and self._peek().text in _ADDITIONS:
            function = _ADDITIONS[self._take().text]
            expr = self._call(function, expr, self._multiplication())
        return expr

    def _multiplication(self) -> Expr:
        expr = self._unary()
        while self._peek().kind == "punct" and self._peek().text in _MULTIPLICATIONS:
            function = _MULTIPLICATIONS[self._take().text]
            expr = self._call(function, expr, self._unary())
        return expr

    def _unary(self) -> Expr:
        if self._at("-") and self._peek(1).kind in ("int", "double") and not self._at_sign_run():
            return self._member()  # `-1`: the sign belongs to the literal
        for op, function in (("!", "!_"), ("-", "-_")):
            if self._at(op):
                count = 0
                while self._at(op):
                    self._take()
                    count += 1
                operand = self._member()
                return operand if count % 2 == 0 else self._call(function, operand)
        return self._member()

    def _at_sign_run(self) -> bool:
        """`--1`: cel-go's lexer takes every `-` into the run, none into the literal."""
        return self._peek(1).kind == "punct" and self._peek(1).text == "-"

    def _member(self) -> Expr:
        expr = self._primary()
        while True:
            if self._at("."):
                self._take()
                if self._at("?"):
                    raise self._fail("unsupported syntax '.?'")
                name = self._field_name()
                if self._at("("):
                    args = self._args(")")
                    expr = self._receiver_call(name, expr, args)
                else:
                    expr = Select(expr, name, id=self._id())
            elif self._at("["):
                self._take()
                if self._at("?"):
                    raise self._fail("unsupported syntax '[?'")
                index = self._expr()
                self._expect("]")
                expr = self._call("_[_]", expr, index)
            elif self._at("{") and _qualified_name(expr) is not None:
                expr = self._message(_qualified_name(expr) or "")
            else:
                return expr

    def _field_name(self) -> str:
        token = self._take()
        if token.kind == "escaped":
            assert isinstance(token.value, str)
            return token.value
        if token.kind != "ident" or token.text in ("true", "false", "null", "in"):
            self._pos -= 1
            raise self._fail(f"mismatched input '{token.text}' expecting IDENTIFIER")
        return token.text

    def _primary(self) -> Expr:
        token = self._peek()
        if token.kind == "punct":
            if token.text == "(":
                self._take()
                expr = self._expr()
                self._expect(")")
                return expr
            if token.text == "[":
                self._take()
                return CreateList(self._args("]"), id=self._id())
            if token.text == "{":
                return self._map()
            if token.text == "." and self._peek(1).kind == "ident":
                self._take()
                return self._identifier(leading_dot=True)
            if token.text == "-" and self._peek(1).kind in ("int", "double"):
                self._take()
                number = self._take()
                assert isinstance(number.value, int | float)
                if number.kind == "int" and number.value > 2**63:
                    raise CELSyntaxError("invalid int literal", number.offset)
                return Literal(number.kind, -number.value, id=self._id())
        if token.kind == "ident":
            return self._identifier(leading_dot=False)
        return self._literal()

    def _identifier(self, *, leading_dot: bool) -> Expr:
        token = self._take()
        name = token.text
        if name in ("true", "false"):
            return Literal("bool", name == "true", id=self._id())
        if name == "null":
            return Literal("null", None, id=self._id())
        if name == "in" or name in cel_lexer.RESERVED:
            self._pos -= 1
            raise self._fail(f"reserved identifier: {name}")
        name = "." + name if leading_dot else name
        if self._at("("):
            return self._global_call(name, self._args(")"))
        return Ident(name, id=self._id())

    def _literal(self) -> Expr:
        token = self._take()
        if token.kind in ("int", "uint", "double", "string", "bytes"):
            if token.kind == "int" and token.value is not None and token.value > 2**63 - 1:
                raise CELSyntaxError("invalid int literal", token.offset)
            if token.kind == "uint" and token.value is not None and token.value > 2**64 - 1:
                raise CELSyntaxError("invalid uint literal", token.offset)
            return Literal(token.kind, token.value, id=self._id())
        self._pos -= 1
        raise self._fail()

    def _args(self, close: str) -> tuple[Expr, ...]:
        """`(a, b)` or the elements of `[a, b,]`; the opening bracket is already taken for
        lists, not for calls."""
        if close == ")":
            self._expect("(")
        args: list[Expr] = []
        while not self._at(close):
            if self._at("?"):
                raise self._fail("unsupported syntax '?'")
            args.append(self._expr())
            if not self._at(","):
                break
            self._take()
            if close == ")" and self._at(close):
                raise self._fail()  # a trailing comma is for lists only
        self._expect(close)
        return tuple(args)

    def _map(self) -> Expr:
        self._expect("{")
        entries: list[tuple[Expr, Expr]] = []
        while not self._at("}"):
            if self._at("?"):
                raise self._fail("unsupported syntax '?'")
            key = self._expr()
            self._expect(":")
            entries.append((key, self._expr()))
            if not self._at(","):
                break
            self._take()
        self._expect("}")
        return CreateMap(tuple(entries), id=self._id())

    def _message(self, type_name: str) -> Expr:
        self._expect("{")
        fields: list[tuple[str, Expr]] = []
        while not self._at("}"):
            if self._at("?"):
                raise self._fail("unsupported syntax '?'")
            name = self._field_name()
            self._expect(":")
            fields.append((name, self._expr()))
            if not self._at(","):
                break
            self._take()
        self._expect("}")
        return CreateStruct(type_name, tuple(fields), id=self._id())

    # Calls and macros (cel-go `parser/macro.go`)

    def _call(self, function: str, *args: Expr) -> Call:
        return Call(function, args, id=self._id())

    def _global_call(self, name: str, args: tuple[Expr, ...]) -> Expr:
        if name == "has" and len(args) == 1:
            arg = args[0]
            if not isinstance(arg, Select) or arg.test_only:
                raise self._fail("invalid argument to has() macro")
            return Select(arg.operand, arg.field, test_only=True, id=self._id())
        return Call(name, args, id=self._id())

    def _receiver_call(self, name: str, target: Expr, args: tuple[Expr, ...]) -> Expr:
        macro = (name in _QUANTIFIERS and len(args) == 2) or (
            (name == "map" and len(args) in (2, 3)) or (name == "filter" and len(args) == 2)
        )
        if not macro:
            return Call(name, args, target, id=self._id())
        if not isinstance(args[0], Ident):
            raise self._fail("argument must be a simple name")
        var = args[0].name
        if var in (ACCUMULATOR, "__result__"):
            raise self._fail("iteration variable overwrites accumulator variable")
        if name == "all":
            init, condition = self._bool(True), self._call("@not_strictly_false", self._accu())
            step, result = self._call("_&&_", self._accu(), args[1]), self._accu()
        elif name == "exists":
            init = self._bool(False)
            not_accu = self._call("!_", self._accu())
            condition = self._call("@not_strictly_false", not_accu)
            step, result = self._call("_||_", self._accu(), args[1]), self._accu()
        elif name == "exists_one":
            init, condition = self._int(0), self._bool(True)
            count = self._call("_+_", self._accu(), self._int(1))
            step = self._call("_?_:_", args[1], count, self._accu())
            result = self._call("_==_", self._accu(), self._int(1))
        else:  # map and filter build a list
            init, condition = CreateList(id=self._id()), self._bool(True)
            element = args[0] if name == "filter" else args[-1]
            step = self._call("_+_", self._accu(), CreateList((element,), id=self._id()))
            if name == "filter" or len(args) == 3:
                step = self._call("_?_:_", args[1], step, self._accu())
            result = self._accu()
        return Comprehension(
            var, target, ACCUMULATOR, init, condition, step, result, macro=name, id=self._id()
        )

    def _accu(self) -> Ident:
        return Ident(ACCUMULATOR, id=self._id())

    def _int(self, value: int) -> Literal:
        return Literal("int", value, id=self._id())

    def _bool(self, value: bool) -> Literal:
        return Literal("bool", value, id=self._id())


def _qualified_name(expr: Expr) -> str | None:
    """`a.b.C` for a chain of plain names (a message type's name), else None."""
    if isinstance(expr, Ident):
        return expr.name
    if isinstance(expr, Select) and not expr.test_only:
        operand = _qualified_name(expr.operand)
        return None if operand is None else f"{operand}.{expr.field}"
    return None
