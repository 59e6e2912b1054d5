"""The worst-case cost of a DRA device selector, as the API server estimates it at admission
and refuses it above `CELSelectorExpressionMaxCost`.

Upstream (`dynamic-resource-allocation/cel/compile.go`) type-checks the expression and calls
`env.EstimateCost` with Kubernetes' `library.CostEstimator` around a DRA size estimator; the
estimate is cel-go's `checker/cost.go` walk over the checked tree. This module is that walk,
on `drasim.common.cel_ast`'s tree, with the little of the type checker it needs (types decide
which overload, and so which cost rule, applies):

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
  `ceil(0.1 * size)`; `dyn(x)` `x` plus 1; Kubernetes' quantity and semver functions 1;
- a comprehension (the `all`, `exists`, `exists_one`, `map` and `filter` macros) costs its
  range, initial value and result, plus the range's size times the cost of one step and
  one loop condition;
- costs add, multiply and round up as cel-go's `CostEstimate` does: saturating at 2^64-1,
  factors in float64.

Sizes (string length in code points, bytes, list or map entries) come from literals, from
the sizes of concatenations and conditionals, or, for what reaches `device`, from upstream's
DRA size hints: `device.driver` at most `DriverNameMaxLength` (63) characters,
`device.allowMultipleAllocations` 1, `device.attributes` and `device.capacity` at most
`ResourceSliceMaxAttributesAndCapacitiesPerDevice` (32) domains of as many entries each,
domains `DeviceMaxDomainLength` (63) and identifiers `DeviceMaxIDLength` (32) characters,
attribute values `DeviceAttributeMaxValueLength` (64). A size nothing bounds is 2^64-1, so
`device.capacity["d"].memory != quantity("1")` is too complex upstream and here: `!=`
compares sizes and Kubernetes' cheap equality of quantities is for `==` only.

Only the maximum is computed (upstream's minimum never changes its maximum for the functions
drasim's selectors can call). Approximations, each towards a higher estimate or one upstream
never reaches: a call no overload accepts (a type error upstream, which refuses it before
estimating) costs its arguments plus 1 instead of upstream's 0; the element type of an empty
list literal stays open until a step of `map` or `filter` fixes it, as cel-go's type
variables do, without cel-go's full unification.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from drasim.common import cel_ast

__all__ = [
    "DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH",
    "DEVICE_MAX_DOMAIN_LENGTH",
    "DEVICE_MAX_ID_LENGTH",
    "DRIVER_NAME_MAX_LENGTH",
    "MAX_COST",
    "RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE",
    "estimate_max_cost",
]

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

# The largest cost and the size of what nothing bounds (cel-go's uint64 saturation).
MAX_COST = 2**64 - 1

# resource.k8s.io limits that bound what `device` holds (upstream's DRA size hints).
DRIVER_NAME_MAX_LENGTH = 63
DEVICE_MAX_DOMAIN_LENGTH = 63
DEVICE_MAX_ID_LENGTH = 32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64
RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32


def _add(a: int, b: int) -> int:
    return min(a + b, MAX_COST)


def _multiply(a: int, b: int) -> int:
    return min(a * b, MAX_COST)


def _factor(x: int, factor: float) -> int:
    """cel-go's `multiplyByCostFactor`: rounded up, in float64, saturating."""
    product = math.ceil(float(x) * factor)
    return MAX_COST if product >= 2**64 else product


# --- Types (what of cel-go's checker the costs need) ---------------------------------------


@dataclass(frozen=True, slots=True)
class _Type:
    """`kind`: bool, int, uint, double, string, bytes, null, duration, timestamp, type, list,
    map, struct (`name` says which), dyn, any (an attribute value: `dyn` to the checker,
    told apart by cost rules) or param (`name` "A"/"B" in overloads; "" for the still-open
    element type of an empty literal)."""

    kind: str
    params: tuple[_Type, ...] = ()
    name: str = ""


def _list(elem: _Type) -> _Type:
    return _Type("list", (elem,))


def _map(key: _Type, value: _Type) -> _Type:
    return _Type("map", (key, value))


_BOOL, _INT, _UINT, _DOUBLE = _Type("bool"), _Type("int"), _Type("uint"), _Type("double")
_STRING, _BYTES, _TYPE = _Type("string"), _Type("bytes"), _Type("type")
_DURATION, _TIMESTAMP = _Type("duration"), _Type("timestamp")
_DYN, _ANY, _OPEN = _Type("dyn"), _Type("any"), _Type("param")
_QUANTITY = _Type("struct", name="kubernetes.Quantity")
_SEMVER = _Type("struct", name="kubernetes.Semver")
_DEVICE_TYPE = _Type("struct", name="kubernetes.DRADevice")
_A, _B = _Type("param", name="A"), _Type("param", name="B")

_SCALARS = frozenset({"bool", "int", "uint", "double", "duration", "timestamp"})
_SELECT_COSTS = frozenset({"map", "struct"})  # and type params, which checking resolves
_TYPE_NAMES = frozenset(
    {"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type"}
)


def _is_open(t: _Type) -> bool:
    return t.kind in ("dyn", "any", "param")


def _join(a: _Type, b: _Type) -> _Type:
    """The common type of two values (list elements, conditional branches)."""
    if a == b:
        return a
    if a == _OPEN:
        return b
    if b == _OPEN:
        return a
    if a.kind == b.kind and a.kind in ("list", "map"):
        return _Type(a.kind, tuple(_join(x, y) for x, y in zip(a.params, b.params, strict=True)))
    return _DYN


# --- The DRA environment (compile.go `newCompiler`, the 1.34+ device type) -----------------


@dataclass(frozen=True, slots=True, eq=False)
class _Decl:
    """An `apiservercel.DeclType`: a type with the maximum size the size estimator reports."""

    max_elements: int = 0
    fields: dict[str, _Decl] = field(default_factory=dict)
    key: _Decl | None = None
    elem: _Decl | None = None


_ATTRIBUTE = _Decl(DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH)
_DOMAIN = _Decl(DEVICE_MAX_DOMAIN_LENGTH)
_ID = _Decl(DEVICE_MAX_ID_LENGTH)
_PER_DEVICE = RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE
_DEVICE_DECL = _Decl(
    fields={
        "driver": _Decl(DRIVER_NAME_MAX_LENGTH),
        "allowMultipleAllocations": _Decl(1),
        "attributes": _Decl(
            _PER_DEVICE, key=_DOMAIN, elem=_Decl(_PER_DEVICE, key=_ID, elem=_ATTRIBUTE)
        ),
        "capacity": _Decl(_PER_DEVICE, key=_DOMAIN, elem=_Decl(_PER_DEVICE, key=_ID, elem=_Decl())),
    }
)
_DEVICE_FIELDS = {
    "driver": _STRING,
    "allowMultipleAllocations": _BOOL,
    "attributes": _map(_STRING, _map(_STRING, _ANY)),
    "capacity": _map(_STRING, _map(_STRING, _QUANTITY)),
}
_DEVICE = "device"


def _dra_size(path: Sequence[str]) -> int | None:
    """compile.go `sizeEstimator.EstimateSize`: the maximum size of what `path` (a variable,
    then fields, `@items`, `@keys`, `@values`) reaches from `device`, if declared."""
    if not path or path[0] != _DEVICE:
        return None
    node = _DEVICE_DECL
    for name in path[1:]:
        if name in ("@items", "@values"):
            if node.elem is None:
                return None
            node = node.elem
        elif name == "@keys":
            if node.key is None:
                return None
            node = node.key
        elif name in node.fields:
            node = node.fields[name]
        elif node.elem is _ATTRIBUTE:  # `device.attributes["d"].<any name>`
            node = _ATTRIBUTE
        else:
            return None
    return node.max_elements


# --- Overloads -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Overload:
    id: str
    params: tuple[_Type, ...]  # the receiver first, for member overloads
    result: _Type
    member: bool = False


def _overloads() -> dict[str, list[_Overload]]:
    """The overloads of the functions and operators drasim's selectors can call (cel-go's
    standard library with cross-type numeric comparisons, Kubernetes' quantity and semver
    libraries), with cel-go's overload ids where a cost rule names them."""
    table: dict[str, list[_Overload]] = {}

    def add(
        function: str, id_: str, params: Sequence[_Type], result: _Type, member: bool = False
    ) -> None:
        table.setdefault(function, []).append(_Overload(id_, tuple(params), result, member))

    numeric = {"int64": _INT, "uint64": _UINT, "double": _DOUBLE}
    ordered = {**numeric, "bool": _BOOL, "string": _STRING, "bytes": _BYTES}
    ordered |= {"timestamp": _TIMESTAMP, "duration": _DURATION}
    for op, name in (
        ("<", "less"),
        ("<=", "less_equals"),
        (">", "greater"),
        (">=", "greater_equals"),
    ):
        function = f"_{op}_"
        for suffix, t in ordered.items():
            add(function, f"{name}_{suffix}", (t, t), _BOOL)
        for a_name, a in numeric.items():
            for b_name, b in numeric.items():
                if a_name != b_name:
                    add(function, f"{name}_{a_name}_{b_name}", (a, b), _BOOL)
    add("_==_", "equals", (_A, _A), _BOOL)
    add("_!=_", "not_equals", (_A, _A), _BOOL)
    for suffix, t in numeric.items():
        for op, name in (("+", "add"), ("-", "subtract"), ("*", "multiply"), ("/", "divide")):
            add(f"_{op}_", f"{name}_{suffix}", (t, t), t)
        if t != _DOUBLE:
            add("_%_", f"modulo_{suffix}", (t, t), t)
        if t != _UINT:
            add("-_", f"negate_{suffix}", (t,), t)
    add("_+_", "add_string", (_STRING, _STRING), _STRING)
    add("_+_", "add_bytes", (_BYTES, _BYTES), _BYTES)
    add("_+_", "add_list", (_list(_A), _list(_A)), _list(_A))
    add("_+_", "add_timestamp_duration", (_TIMESTAMP, _DURATION), _TIMESTAMP)
    add("_+_", "add_duration_timestamp", (_DURATION, _TIMESTAMP), _TIMESTAMP)
    add("_+_", "add_duration_duration", (_DURATION, _DURATION), _DURATION)
    add("_-_", "subtract_timestamp_timestamp", (_TIMESTAMP, _TIMESTAMP), _DURATION)
    add("_-_", "subtract_timestamp_duration", (_TIMESTAMP, _DURATION), _TIMESTAMP)
    add("_-_", "subtract_duration_duration", (_DURATION, _DURATION), _DURATION)
    add("!_", "logical_not", (_BOOL,), _BOOL)
    add("_&&_", "logical_and", (_BOOL, _BOOL), _BOOL)
    add("_||_", "logical_or", (_BOOL, _BOOL), _BOOL)
    add("@not_strictly_false", "not_strictly_false", (_BOOL,), _BOOL)
    add("_?_:_", "conditional", (_BOOL, _A, _A), _A)
    add("@in", "in_list", (_A, _list(_A)), _BOOL)
    add("@in", "in_map", (_A, _map(_A, _B)), _BOOL)
    add("_[_]", "index_list", (_list(_A), _INT), _A)
    add("_[_]", "index_map", (_map(_A, _B), _A), _B)
    for suffix, t in {"string": _STRING, "bytes": _BYTES, "list": _list(_A)}.items():
        add("size", f"size_{suffix}", (t,), _INT)
        add("size", f"{suffix}_size", (t,), _INT, member=True)
    add("size", "size_map", (_map(_A, _B),), _INT)
    add("size", "map_size", (_map(_A, _B),), _INT, member=True)
    add("contains", "contains_string", (_STRING, _STRING), _BOOL, member=True)
    add("startsWith", "starts_with_string", (_STRING, _STRING), _BOOL, member=True)
    add("endsWith", "ends_with_string", (_STRING, _STRING), _BOOL, member=True)
    add("matches", "matches", (_STRING, _STRING), _BOOL)
    add("matches", "matches_string", (_STRING, _STRING), _BOOL, member=True)
    conversions = {
        "int": (_INT, [_INT, _UINT, _DOUBLE, _STRING, _TIMESTAMP]),
        "uint": (_UINT, [_UINT, _INT, _DOUBLE, _STRING]),
        "double": (_DOUBLE, [_DOUBLE, _INT, _UINT, _STRING]),
        "string": (_STRING, [_STRING, _INT, _UINT, _DOUBLE, _BYTES, _BOOL, _TIMESTAMP, _DURATION]),
        "bytes": (_BYTES, [_BYTES, _STRING]),
        "duration": (_DURATION, [_DURATION, _STRING]),
        "timestamp": (_TIMESTAMP, [_TIMESTAMP, _STRING, _INT]),
    }
    for function, (result, sources) in conversions.items():
        for source in sources:
            add(
                function, f"{_ID_NAMES[source.kind]}_to_{_ID_NAMES[result.kind]}", (source,), result
            )
    add("type", "type", (_A,), _TYPE)
    add("dyn", "to_dyn", (_A,), _DYN)
    for getter in _TIME_GETTERS:
        add(getter, f"timestamp_to_{getter}", (_TIMESTAMP,), _INT, member=True)
        add(getter, f"timestamp_to_{getter}_with_tz", (_TIMESTAMP, _STRING), _INT, member=True)
        if getter in ("getHours", "getMinutes", "getSeconds", "getMilliseconds"):
            add(getter, f"duration_to_{getter}", (_DURATION,), _INT, member=True)
    # Kubernetes `library.Quantity` and `library.SemverLib`.
    add("quantity", "string_to_quantity", (_STRING,), _QUANTITY)
    add("isQuantity", "is_quantity_string", (_STRING,), _BOOL)
    add("semver", "string_to_semver", (_STRING,), _SEMVER)
    add("semver", "string_bool_to_semver", (_STRING, _BOOL), _SEMVER)
    add("isSemver", "is_semver_string", (_STRING,), _BOOL)
    add("isSemver", "is_semver_string_bool", (_STRING, _BOOL), _BOOL)
    for t, prefix in ((_QUANTITY, "quantity"), (_SEMVER, "semver")):
        add("compareTo", f"{prefix}_compareTo_{prefix}", (t, t), _INT, member=True)
        add("isGreaterThan", f"{prefix}_is_greater_than", (t, t), _BOOL, member=True)
        add("isLessThan", f"{prefix}_is_less_than", (t, t), _BOOL, member=True)
    for op in ("add", "sub"):
        add(op, f"quantity_{op}", (_QUANTITY, _QUANTITY), _QUANTITY, member=True)
        add(op, f"quantity_{op}_int", (_QUANTITY, _INT), _QUANTITY, member=True)
    add("sign", "quantity_sign", (_QUANTITY,), _INT, member=True)
    add("isInteger", "quantity_is_integer", (_QUANTITY,), _BOOL, member=True)
    add("asInteger", "quantity_get_integer", (_QUANTITY,), _INT, member=True)
    add("asApproximateFloat", "quantity_get_float", (_QUANTITY,), _DOUBLE, member=True)
    for part in ("major", "minor", "patch"):
        add(part, f"semver_{part}", (_SEMVER,), _INT, member=True)
    return table


_TIME_GETTERS = (
    "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds",
)  # fmt: skip
_ID_NAMES = {
    "int": "int64", "uint": "uint64", "double": "double", "string": "string", "bytes": "bytes",
    "bool": "bool", "timestamp": "timestamp", "duration": "duration",
}  # fmt: skip
_OVERLOADS = _overloads()
# Kubernetes' `library.CostEstimator` prices these at 1 (the quantity and semver parsers
# only as member calls, which they never are, so they cost cel-go's default 1 too).
_KUBERNETES_UNIT_COST = frozenset(
    {"sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
     "compareTo", "add", "sub", "major", "minor", "patch"}
)  # fmt: skip
_SIZE_COMPARISONS = frozenset(
    {f"{name}_{suffix}" for name in ("less", "less_equals", "greater", "greater_equals")
     for suffix in ("string", "bytes")} | {"equals", "not_equals"}
)  # fmt: skip


def _match(pattern: _Type, actual: _Type, bindings: dict[str, list[_Type]]) -> bool:
    if _is_open(actual):
        if actual == _OPEN and pattern.kind == "param":
            bindings.setdefault(pattern.name, []).append(_OPEN)
        return True
    if pattern.kind == "param":
        bindings.setdefault(pattern.name, []).append(actual)
        return True
    if pattern.kind != actual.kind or pattern.name != actual.name:
        return False
    return all(_match(p, a, bindings) for p, a in zip(pattern.params, actual.params, strict=True))


def _substitute(pattern: _Type, bindings: dict[str, list[_Type]]) -> _Type:
    if pattern.kind == "param":
        bound = bindings.get(pattern.name)
        if not bound:
            return _DYN
        joined = bound[0]
        for t in bound[1:]:
            joined = _join(joined, t)
        return joined
    if pattern.params:
        return _Type(pattern.kind, tuple(_substitute(p, bindings) for p in pattern.params))
    return pattern


def _resolve(call: cel_ast.Call, arg_types: list[_Type]) -> tuple[list[str], _Type]:
    """The overloads the checker would keep for `call`, and the call's type."""
    ids: list[str] = []
    result: _Type | None = None
    for overload in _OVERLOADS.get(call.function, []):
        if overload.member != (call.target is not None) or len(overload.params) != len(arg_types):
            continue
        bindings: dict[str, list[_Type]] = {}
        if not all(_match(p, a, bindings) for p, a in zip(overload.params, arg_types, strict=True)):
            continue
        ids.append(overload.id)
        t = _substitute(overload.result, bindings)
        result = t if result is None or result == t else _DYN
    return ids, result if result is not None else _DYN


# --- The type pass -------------------------------------------------------------------------


class _Checker:
    """Types every node, as far as costs need: the result type of each call and the
    overloads that may run (`overloads`), the type of every other node."""

    def __init__(self) -> None:
        self.types: dict[int, _Type] = {}
        self.overloads: dict[int, list[str]] = {}
        self._scopes: dict[str, list[_Type]] = {}

    def check(self, e: cel_ast.Expr) -> _Type:
        t = self._check(e)
        self.types[e.id] = t
        return t

    def _check(self, e: cel_ast.Expr) -> _Type:
        match e:
            case cel_ast.Literal(kind=kind):
                return _Type(kind)
            case cel_ast.Ident(name=name):
                if self._scopes.get(name):  # a leading dot (root scope) never names a local
                    return self._scopes[name][-1]
                name = name.removeprefix(".")
                if name == _DEVICE:
                    return _DEVICE_TYPE
                return _TYPE if name in _TYPE_NAMES else _DYN
            case cel_ast.Select(operand=operand, field=name, test_only=test_only):
                t = self.check(operand)
                if test_only:
                    return _BOOL
                if t == _DEVICE_TYPE:
                    return _DEVICE_FIELDS.get(name, _DYN)
                return t.params[1] if t.kind == "map" else _DYN
            case cel_ast.Call():
                return self._call(e)
            case cel_ast.CreateList(elements=elements):
                elem = _OPEN
                for element in elements:
                    elem = _join(elem, self.check(element))
                return _list(elem)
            case cel_ast.CreateMap(entries=entries):
                key = value = _OPEN
                for k, v in entries:
                    key = _join(key, self.check(k))
                    value = _join(value, self.check(v))
                return _map(key, value)
            case cel_ast.CreateStruct(type_name=name, fields=fields):
                for _, v in fields:
                    self.check(v)
                return _Type("struct", name=name)
            case cel_ast.Comprehension():
                return self._comprehension(e)
        raise TypeError(f"not a CEL expression: {e!r}")

    def _call(self, e: cel_ast.Call) -> _Type:
        arg_types = [self.check(arg) for arg in e.args]
        if e.target is not None:
            arg_types.insert(0, self.check(e.target))
        ids, t = _resolve(e, arg_types)
        self.overloads[e.id] = ids
        return t

    def _comprehension(self, e: cel_ast.Comprehension) -> _Type:
        range_type = self.check(e.iter_range)
        # A list's elements, a map's keys.
        iter_type = range_type.params[0] if range_type.kind in ("list", "map") else _DYN
        accu_type = self.check(e.accu_init)
        self._push(e.accu_var, accu_type)
        self._push(e.iter_var, iter_type)
        self.check(e.loop_condition)
        step_type = self.check(e.loop_step)
        self._pop(e.iter_var)
        # `map` and `filter` start from `[]`: the step says what the list holds.
        self._scopes[e.accu_var][-1] = _join(accu_type, step_type)
        t = self.check(e.result)
        self._pop(e.accu_var)
        return t

    def _push(self, name: str, t: _Type) -> None:
        self._scopes.setdefault(name, []).append(t)

    def _pop(self, name: str) -> None:
        self._scopes[name].pop()


# --- The cost pass (cel-go `checker/cost.go`, maxima only) ---------------------------------


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
    type: _Type
    size: int | None  # `ComputedSize`


class _Coster:
    def __init__(self, checker: _Checker) -> None:
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
            and args[0].type in (_QUANTITY, _SEMVER)
        ):
            return _add(1, arg_sum), None
        size = _size_or_unknown
        if overload == "string_to_bytes":
            n = size(args[0])
            return _add(_factor(n, _STRING_TRAVERSAL_COST_FACTOR), arg_sum), _multiply(n, 4)
        if overload == "bytes_to_string":
            n = size(args[0])
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

    def _type(self, e: cel_ast.Expr) -> _Type:
        return self._types.get(e.id, _DYN)

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
        estimated = _dra_size(self._path(e))
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
    checker = _Checker()
    checker.check(expr)
    return _Coster(checker).cost(expr)
