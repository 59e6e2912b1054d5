"""The worst-case cost of a DRA device selector, as the API server estimates it at admission
and refuses it above `CELSelectorExpressionMaxCost`.

Upstream (`dynamic-resource-allocation/cel/compile.go`) type-checks the expression and calls
`env.EstimateCost` with Kubernetes' `library.CostEstimator` around a DRA size estimator; the
estimate is cel-go's `checker/cost.go` walk over the checked tree. This module is that walk,
on `drasim.common.cel_ast`'s tree checked by `drasim.common.cel_checker` (types decide which
overload, and so which cost rule, applies):

- a literal costs 0, an identifier 1, a field selection 1 on a map or struct (0 on an
  attribute value, whose type is `any`), `has()` only its operand (Kubernetes sets
  `PresenceTestHasCost(false)`), creating a list 10, a map 30, a message 40, plus the
  elements;
- a call costs its arguments plus 1, except: `&&`, `||` and `?:` only their arguments (the
  conditional's more expensive branch); `==`, `!=` and string/bytes ordering
  `ceil(0.1 * min(size(lhs), size(rhs)))`, with `==` between quantities or semvers 1
  (Kubernetes); `x in list` the list's size; `startsWith`/`endsWith` `ceil(0.1 * size(arg))`;
  `contains` `ceil(0.1 * size(s)) * ceil(0.1 * size(arg))`; `matches`
  `ceil(0.1 * (size(s) + 1)) * ceil(0.25 * size(regex))`; string and bytes `+`
  `ceil(0.1 * (size(lhs) + size(rhs)))`; `bytes(string)` and `string(bytes)`
  `ceil(0.1 * size)`; `lowerAscii`/`upperAscii` `ceil(0.1 * size(s))`; `dyn(x)` `x` plus 1;
  Kubernetes' quantity and semver functions 1;
- a comprehension (the `all`, `exists`, `exists_one`, `map` and `filter` macros) costs its
  range, initial value and result, plus the range's size times the cost of one step and
  one loop condition;
- costs add, multiply and round up as cel-go's `CostEstimate` does: saturating at 2^64-1,
  factors in float64.

Sizes (string length in code points, bytes, list or map entries) come from literals, from
the sizes of concatenations and conditionals, or, for what reaches `device`, from upstream's
DRA size hints (`cel_checker.dra_size`): `device.driver` at most `DriverNameMaxLength` (63)
characters,
`device.allowMultipleAllocations` 1, `device.attributes` and `device.capacity` at most
`ResourceSliceMaxAttributesAndCapacitiesPerDevice` (32) domains of as many entries each,
domains `DeviceMaxDomainLength` (63) and identifiers `DeviceMaxIDLength` (32) characters,
attribute values `DeviceAttributeMaxValueLength` (64). A size nothing bounds is 2^64-1, so
`device.capacity["d"].memory != quantity("1")` is too complex upstream and here: `!=`
compares sizes and Kubernetes' cheap equality of quantities is for `==` only.

Only the maximum is computed (upstream's minimum never changes its maximum for the functions
drasim's selectors can call). Approximations, each towards a higher estimate or one upstream
never reaches: a call no overload accepts (a type error upstream, which refuses it before
estimating) costs its arguments plus 1 instead of upstream's 0; and those of the checker
(see `drasim.common.cel_checker`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from drasim.common import cel_ast, cel_checker

__all__ = ["MAX_COST", "estimate_max_cost"]

# cel-go `common/cost.go`.
_SELECT_AND_IDENT_COST = 1
_CONST_COST = 0
_LIST_CREATE_BASE_COST = 10
_MAP_CREATE_BASE_COST = 30
_STRUCT_CREATE_BASE_COST = 40
_STRING_TRAVERSAL_COST_FACTOR = 0.1
_REGEX_STRING_LENGTH_COST_FACTOR = 0.25
# Kubernetes' environments set `checker.PresenceTestHasCost(false)`.
_PRESENCE_TEST_COST = 0
# Kubernetes' `library.CostEstimator` prices these at 1 (the quantity and semver parsers
# only as member calls, which they never are, so they cost cel-go's default 1 too).
_KUBERNETES_UNIT_COST = frozenset(
    {"sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
     "compareTo", "add", "sub", "major", "minor", "patch"}
)  # fmt: skip
# Overloads that cost the traversal of the smaller operand (cel-go's equality and string and
# bytes ordering).
_SIZE_COMPARISONS = frozenset(
    {f"{name}_{suffix}" for name in ("less", "less_equals", "greater", "greater_equals")
     for suffix in ("string", "bytes")} | {"equals", "not_equals"}
)  # fmt: skip
# Types whose values have size 1.
_SCALARS = frozenset({"bool", "int", "uint", "double", "duration", "timestamp"})
# Selecting a field costs 1 on these.
_SELECT_COSTS = frozenset({"map", "struct"})  # and type params, which checking resolves

# The largest cost and the size of what nothing bounds (cel-go's uint64 saturation).
MAX_COST = 2**64 - 1


def _add(a: int, b: int) -> int:
    return min(a + b, MAX_COST)


def _multiply(a: int, b: int) -> int:
    return min(a * b, MAX_COST)


def _factor(x: int, factor: float) -> int:
    """cel-go's `multiplyByCostFactor`: rounded up, in float64, saturating."""
    product = math.ceil(float(x) * factor)
    return MAX_COST if product >= 2**64 else product


@dataclass(frozen=True, slots=True)
class _Entries:
    """cel-go's `entrySizeEstimate`: the largest key (or index) and value of a container."""

    container: str  # "list" or "map"
    key: int
    value: int


def _union_entries(a: _Entries | None, b: _Entries | None) -> _Entries | None:
    if a is None or b is None:
        return None
    return _Entries(a.container, max(a.key, b.key), max(a.value, b.value))


@dataclass(slots=True)
class _Local:
    path: tuple[str, ...]
    size: int | None
    entries: _Entries | None


@dataclass(slots=True)
class _Node:
    """cel-go's `AstNode` for a call's target or argument."""

    expr: cel_ast.Expr
    type: cel_checker.Type
    size: int | None  # `ComputedSize`


class _Coster:
    """cel-go's `coster` (`checker/cost.go`), maxima only: the cost of every node, with the
    sizes and container entries it learns on the way (by expression id) and the locals of
    the comprehensions it is in."""

    def __init__(self, checker: cel_checker.Checker) -> None:
        self._types = checker.types
        self._overloads = checker.overloads
        self._paths: dict[int, tuple[str, ...]] = {}
        self._sizes: dict[int, int] = {}
        self._entries: dict[int, _Entries] = {}
        self._locals: dict[str, list[_Local]] = {}

    def cost(self, e: cel_ast.Expr) -> int:
        match e:
            case cel_ast.Literal():
                return _CONST_COST
            case cel_ast.Ident(name=name):
                local = self._local(name)
                # The checker resolves `.device` (root scope) to `device`.
                self._paths[e.id] = local.path if local is not None else (name.removeprefix("."),)
                return _SELECT_AND_IDENT_COST
            case cel_ast.Select():
                return self._select(e)
            case cel_ast.Call():
                return self._call(e)
            case cel_ast.CreateList():
                return self._create_list(e)
            case cel_ast.CreateMap():
                return self._create_map(e)
            case cel_ast.CreateStruct(fields=fields):
                total = _STRUCT_CREATE_BASE_COST
                for _, value in fields:
                    total = _add(total, self.cost(value))
                return total
            case cel_ast.Comprehension():
                return self._comprehension(e)
        raise TypeError(f"not a CEL expression: {e!r}")

    # Nodes

    def _select(self, e: cel_ast.Select) -> int:
        if e.test_only:
            return _add(_PRESENCE_TEST_COST, self.cost(e.operand))
        total = self.cost(e.operand)
        if self._type(e.operand).kind in _SELECT_COSTS:
            total = _add(total, _SELECT_AND_IDENT_COST)
        self._paths[e.id] = (*self._path(e.operand), e.field)
        return total

    def _call(self, e: cel_ast.Call) -> int:
        if e.function == "dyn" and len(e.args) == 1 and e.target is None:
            total = _add(1, self.cost(e.args[0]))  # dyn() only turns type checks off
            self._copy_sizes(e, e.args[0])
            return total
        arg_costs = [self.cost(arg) for arg in e.args]
        args = [self._node(arg) for arg in e.args]
        total = 0
        target = None
        if e.target is not None:
            total = self.cost(e.target)
            target = self._node(e.target)
        ids = self._overloads.get(e.id, [])
        if not ids:  # a type error upstream: refused before any estimate
            return _add(total, _add(1, _sum(arg_costs)))
        fn_cost = 0
        result_size: int | None = None
        for overload in ids:
            cost, size = self._function_cost(e, overload, target, args, arg_costs)
            fn_cost = max(fn_cost, cost)
            if size is not None:
                result_size = size if result_size is None else max(result_size, size)
            if overload in ("index_list", "index_map") and e.args:
                entries = self._entries_of(e.args[0])
                result_size = None if entries is None else entries.value
                suffix = "@items" if overload == "index_list" else "@values"
                self._paths[e.id] = (*self._path(e.args[0]), suffix)
            if result_size is None:
                result_size = self._size(e)
        if result_size is not None:
            self._sizes[e.id] = result_size
        return _add(total, fn_cost)

    def _function_cost(
        self,
        e: cel_ast.Call,
        overload: str,
        target: _Node | None,
        args: list[_Node],
        arg_costs: list[int],
    ) -> tuple[int, int | None]:
        """cel-go `coster.functionCost` after Kubernetes' `CostEstimator.EstimateCallCost`:
        the call's cost including its arguments' (not its target's), and its result's size
        where the rule knows it."""
        arg_sum = _sum(arg_costs)
        if e.function in _KUBERNETES_UNIT_COST:
            return _add(1, arg_sum), None
        if (
            e.function == "_==_"
            and len(args) == 2
            and args[0].type == args[1].type
            and args[0].type in (cel_checker.QUANTITY, cel_checker.SEMVER)
        ):
            return _add(1, arg_sum), None
        size = _size_or_unknown
        if overload == "string_to_bytes":
            n = size(args[0])
            return _add(_factor(n, _STRING_TRAVERSAL_COST_FACTOR), arg_sum), _multiply(n, 4)
        if overload == "bytes_to_string":
            n = size(args[0])
            return _add(_factor(n, _STRING_TRAVERSAL_COST_FACTOR), arg_sum), n
        if overload in ("string_lower_ascii", "string_upper_ascii") and target is not None:
            n = size(target)  # Kubernetes prices a traversal of the string
            return _add(_factor(n, _STRING_TRAVERSAL_COST_FACTOR), arg_sum), n
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return _add(_factor(size(args[0]), _STRING_TRAVERSAL_COST_FACTOR), arg_sum), None
        if overload == "in_list" and len(args) == 2:
            return _add(_factor(size(args[1]), 1), arg_sum), None
        if overload == "matches_string" and target is not None and len(args) == 1:
            text = _factor(_add(size(target), 1), _STRING_TRAVERSAL_COST_FACTOR)
            regex = _factor(size(args[0]), _REGEX_STRING_LENGTH_COST_FACTOR)
            return _add(_multiply(text, regex), arg_sum), None
        if overload == "contains_string" and target is not None and len(args) == 1:
            text = _factor(size(target), _STRING_TRAVERSAL_COST_FACTOR)
            sub = _factor(size(args[0]), _STRING_TRAVERSAL_COST_FACTOR)
            return _add(_multiply(text, sub), arg_sum), None
        if overload in ("logical_and", "logical_or"):
            return _add(arg_costs[0], arg_costs[1]), None
        if overload == "conditional":
            entries = _union_entries(self._entries_of(args[1].expr), self._entries_of(args[2].expr))
            if entries is not None:
                self._entries[e.id] = entries
            branch = max(arg_costs[1], arg_costs[2])
            return _add(arg_costs[0], branch), max(size(args[1]), size(args[2]))
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            result = _add(size(args[0]), size(args[1]))
            entries = _union_entries(self._entries_of(args[0].expr), self._entries_of(args[1].expr))
            if entries is not None:
                self._entries[e.id] = entries
            if overload == "add_list":
                return _add(1, arg_sum), result
            return _add(_factor(result, _STRING_TRAVERSAL_COST_FACTOR), arg_sum), result
        if overload in _SIZE_COMPARISONS:
            smallest = min(size(args[0]), size(args[1]))
            return _add(_factor(smallest, _STRING_TRAVERSAL_COST_FACTOR), arg_sum), None
        return _add(1, arg_sum), None

    def _create_list(self, e: cel_ast.CreateList) -> int:
        total = 0
        item = 0
        for element in e.elements:
            total = _add(total, self.cost(element))
            item = max(item, self._size_or_unknown_expr(element))
        self._entries[e.id] = _Entries("list", 1, item)
        return _add(total, _LIST_CREATE_BASE_COST)

    def _create_map(self, e: cel_ast.CreateMap) -> int:
        total = 0
        key = value = 0
        for k, v in e.entries:
            total = _add(_add(total, self.cost(k)), self.cost(v))
            key = max(key, self._size_or_unknown_expr(k))
            value = max(value, self._size_or_unknown_expr(v))
        self._entries[e.id] = _Entries("map", key, value)
        return _add(total, _MAP_CREATE_BASE_COST)

    def _comprehension(self, e: cel_ast.Comprehension) -> int:
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        self._push(
            e.accu_var,
            _Local(self._path(e.accu_init), self._size(e.accu_init), self._entries_of(e.accu_init)),
        )
        # cel-go `pushIterSingle`: a list's elements, a map's keys.
        entries = self._entries_of(e.iter_range)
        container = entries.container if entries is not None else self._type(e.iter_range).kind
        if container == "list":
            iter_local = _Local(
                (*self._path(e.iter_range), "@items"),
                entries.value if entries is not None else None,
                None,
            )
        else:
            iter_local = _Local(
                (*self._path(e.iter_range), "@keys"),
                entries.key if entries is not None else None,
                None,
            )
        self._push(e.iter_var, iter_local)
        loop_cost = self.cost(e.loop_condition)
        step_cost = self.cost(e.loop_step)
        self._pop(e.iter_var)
        total = _add(total, self.cost(e.result))
        self._pop(e.accu_var)
        range_count = self._size_or_unknown_expr(e.iter_range)
        total = _add(total, _multiply(range_count, _add(step_cost, loop_cost)))
        if isinstance(e.accu_init, cel_ast.Literal):
            size = self._size(e.accu_init)
            if size is not None:
                self._sizes[e.id] = size
        elif isinstance(e.accu_init, cel_ast.CreateList | cel_ast.CreateMap):
            self._sizes[e.id] = range_count
            step_entries = self._entries_of(e.loop_step)
            if step_entries is not None:
                self._entries[e.id] = step_entries
        return total

    # Paths, sizes and scopes

    def _type(self, e: cel_ast.Expr) -> cel_checker.Type:
        return self._types.get(e.id, cel_checker.DYN)

    def _local(self, name: str) -> _Local | None:
        stack = self._locals.get(name)
        return stack[-1] if stack else None

    def _push(self, name: str, local: _Local) -> None:
        self._locals.setdefault(name, []).append(local)

    def _pop(self, name: str) -> None:
        self._locals[name].pop()

    def _path(self, e: cel_ast.Expr) -> tuple[str, ...]:
        if isinstance(e, cel_ast.Ident):
            local = self._local(e.name)
            if local is not None:
                return local.path
        return self._paths.get(e.id, ())

    def _node(self, e: cel_ast.Expr) -> _Node:
        return _Node(e, self._type(e), self._size(e))

    def _size(self, e: cel_ast.Expr) -> int | None:
        """cel-go `coster.computeSize`."""
        if e.id in self._sizes:
            return self._sizes[e.id]
        literal = _literal_size(e)
        if literal is not None:
            return literal
        estimated = cel_checker.dra_size(self._path(e))
        if estimated is not None:
            self._sizes[e.id] = estimated
            return estimated
        t = self._type(e)
        if t.kind in _SCALARS:
            return 1
        if isinstance(e, cel_ast.Ident):
            local = self._local(e.name)
            if local is not None and local.size is not None:
                return local.size
        return None

    def _size_or_unknown_expr(self, e: cel_ast.Expr) -> int:
        size = self._size(e)
        return MAX_COST if size is None else size

    def _entries_of(self, e: cel_ast.Expr) -> _Entries | None:
        if e.id in self._entries:
            return self._entries[e.id]
        if isinstance(e, cel_ast.Ident):
            local = self._local(e.name)
            if local is not None:
                return local.entries
        return None

    def _copy_sizes(self, dst: cel_ast.Expr, src: cel_ast.Expr) -> None:
        size = self._size(src)
        if size is not None:
            self._sizes[dst.id] = size
        entries = self._entries_of(src)
        if entries is not None:
            self._entries[dst.id] = entries


def _literal_size(e: cel_ast.Expr) -> int | None:
    """cel-go `computeExprSize`: what the expression's text tells."""
    match e:
        case cel_ast.Literal(kind="string", value=str() as text):
            return len(text)
        case cel_ast.Literal(kind="bytes", value=bytes() as data):
            return len(data)
        case cel_ast.Literal():
            return 1
        case cel_ast.CreateList(elements=elements):
            return len(elements)
        case cel_ast.CreateMap(entries=entries):
            return len(entries)
    return None


def _size_or_unknown(node: _Node) -> int:
    return MAX_COST if node.size is None else node.size


def _sum(costs: Sequence[int]) -> int:
    total = 0
    for cost in costs:
        total = _add(total, cost)
    return total


def estimate_max_cost(expr: cel_ast.Expr) -> int:
    """The worst-case cost upstream's estimator gives a device selector (module doc)."""
    checker = cel_checker.Checker()
    checker.check(expr)
    return _Coster(checker).cost(expr)
