"""The little of cel-go's type checker that the cost of a DRA device selector depends on,
in the environment upstream declares for selectors.

`drasim.common.cel_cost` prices each call by the overload that runs, and sizes what it reads
from `device` by the declared maximum, so it needs what cel-go's checker (`checker/checker.go`)
would know: the type of every node of `drasim.common.cel_ast`'s tree, the overloads a call
may resolve to (cel-go's overload ids), and the declared size of what a path from `device`
reaches. The environment is upstream's (`dynamic-resource-allocation/cel/compile.go`,
`newCompiler`): the variable `device` of type `kubernetes.DRADevice`, cel-go's standard
library with cross-type numeric comparisons, and Kubernetes' quantity and semver libraries
(`apiserver/pkg/cel/library`). Sizes come from the limits of resource.k8s.io
(`drasim.common.api.resource_v1`), as compile.go's size estimator takes them from
`k8s.io/api/resource/v1`.

Types are checked as far as costs need, no further: a call no overload accepts is typed
`dyn` with no overload (upstream refuses it before estimating), and the element type of an
empty list literal stays open until a step of `map` or `filter` fixes it, as cel-go's type
variables do, without cel-go's full unification.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from drasim.common import cel_ast
from drasim.common.api import resource_v1

__all__ = ["DYN", "QUANTITY", "SEMVER", "Checker", "Type", "dra_size"]


# --- Types ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Type:
    """`kind`: bool, int, uint, double, string, bytes, null, duration, timestamp, type, list,
    map, struct (`name` says which), dyn, any (an attribute value: `dyn` to the checker,
    told apart by cost rules) or param (`name` "A"/"B" in overloads; "" for the still-open
    element type of an empty literal)."""

    kind: str
    params: tuple[Type, ...] = ()
    name: str = ""


def _list(elem: Type) -> Type:
    return Type("list", (elem,))


def _map(key: Type, value: Type) -> Type:
    return Type("map", (key, value))


_BOOL, _INT, _UINT, _DOUBLE = Type("bool"), Type("int"), Type("uint"), Type("double")
_STRING, _BYTES, _TYPE = Type("string"), Type("bytes"), Type("type")
_DURATION, _TIMESTAMP = Type("duration"), Type("timestamp")
DYN, _ANY, _OPEN = Type("dyn"), Type("any"), Type("param")
QUANTITY = Type("struct", name="kubernetes.Quantity")
SEMVER = Type("struct", name="kubernetes.Semver")
_DEVICE_TYPE = Type("struct", name="kubernetes.DRADevice")
_A, _B = Type("param", name="A"), Type("param", name="B")

_TYPE_NAMES = frozenset(
    {"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type"}
)


def _is_open(t: Type) -> bool:
    return t.kind in ("dyn", "any", "param")


def _join(a: Type, b: Type) -> Type:
    """The common type of two values (list elements, conditional branches)."""
    if a == b:
        return a
    if a == _OPEN:
        return b
    if b == _OPEN:
        return a
    if a.kind == b.kind and a.kind in ("list", "map"):
        return Type(a.kind, tuple(_join(x, y) for x, y in zip(a.params, b.params, strict=True)))
    return DYN


# --- The DRA environment (compile.go `newCompiler`, the 1.34+ device type) -----------------


@dataclass(frozen=True, slots=True, eq=False)
class _Decl:
    """An `apiservercel.DeclType`: a type with the maximum size the size estimator reports."""

    max_elements: int = 0
    fields: dict[str, _Decl] = field(default_factory=dict)
    key: _Decl | None = None
    elem: _Decl | None = None


_ATTRIBUTE = _Decl(resource_v1.DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH)
_DOMAIN = _Decl(resource_v1.DEVICE_MAX_DOMAIN_LENGTH)
_ID = _Decl(resource_v1.DEVICE_MAX_ID_LENGTH)
_PER_DEVICE = resource_v1.ATTRIBUTES_AND_CAPACITIES_MAX_PER_DEVICE
_DEVICE_DECL = _Decl(
    fields={
        "driver": _Decl(resource_v1.DRIVER_NAME_MAX_LENGTH),
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
    "capacity": _map(_STRING, _map(_STRING, QUANTITY)),
}
_DEVICE = "device"


def dra_size(path: Sequence[str]) -> int | None:
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
    params: tuple[Type, ...]  # the receiver first, for member overloads
    result: Type
    member: bool = False


def _overloads() -> dict[str, list[_Overload]]:
    """The overloads of the functions and operators drasim's selectors can call (cel-go's
    standard library with cross-type numeric comparisons, Kubernetes' quantity and semver
    libraries), with cel-go's overload ids where a cost rule names them."""
    table: dict[str, list[_Overload]] = {}

    def add(
        function: str, id_: str, params: Sequence[Type], result: Type, member: bool = False
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
    # cel-go's ext.Strings, part of Kubernetes' environment.
    add("lowerAscii", "string_lower_ascii", (_STRING,), _STRING, member=True)
    add("upperAscii", "string_upper_ascii", (_STRING,), _STRING, member=True)
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
    add("dyn", "to_dyn", (_A,), DYN)
    for getter in _TIME_GETTERS:
        add(getter, f"timestamp_to_{getter}", (_TIMESTAMP,), _INT, member=True)
        add(getter, f"timestamp_to_{getter}_with_tz", (_TIMESTAMP, _STRING), _INT, member=True)
        if getter in ("getHours", "getMinutes", "getSeconds", "getMilliseconds"):
            add(getter, f"duration_to_{getter}", (_DURATION,), _INT, member=True)
    # Kubernetes `library.Quantity` and `library.SemverLib`.
    add("quantity", "string_to_quantity", (_STRING,), QUANTITY)
    add("isQuantity", "is_quantity_string", (_STRING,), _BOOL)
    add("semver", "string_to_semver", (_STRING,), SEMVER)
    add("semver", "string_bool_to_semver", (_STRING, _BOOL), SEMVER)
    add("isSemver", "is_semver_string", (_STRING,), _BOOL)
    add("isSemver", "is_semver_string_bool", (_STRING, _BOOL), _BOOL)
    for t, prefix in ((QUANTITY, "quantity"), (SEMVER, "semver")):
        add("compareTo", f"{prefix}_compareTo_{prefix}", (t, t), _INT, member=True)
        add("isGreaterThan", f"{prefix}_is_greater_than", (t, t), _BOOL, member=True)
        add("isLessThan", f"{prefix}_is_less_than", (t, t), _BOOL, member=True)
    for op in ("add", "sub"):
        add(op, f"quantity_{op}", (QUANTITY, QUANTITY), QUANTITY, member=True)
        add(op, f"quantity_{op}_int", (QUANTITY, _INT), QUANTITY, member=True)
    add("sign", "quantity_sign", (QUANTITY,), _INT, member=True)
    add("isInteger", "quantity_is_integer", (QUANTITY,), _BOOL, member=True)
    add("asInteger", "quantity_get_integer", (QUANTITY,), _INT, member=True)
    add("asApproximateFloat", "quantity_get_float", (QUANTITY,), _DOUBLE, member=True)
    for part in ("major", "minor", "patch"):
        add(part, f"semver_{part}", (SEMVER,), _INT, member=True)
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


def _match(pattern: Type, actual: Type, bindings: dict[str, list[Type]]) -> bool:
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


def _substitute(pattern: Type, bindings: dict[str, list[Type]]) -> Type:
    if pattern.kind == "param":
        bound = bindings.get(pattern.name)
        if not bound:
            return DYN
        joined = bound[0]
        for t in bound[1:]:
            joined = _join(joined, t)
        return joined
    if pattern.params:
        return Type(pattern.kind, tuple(_substitute(p, bindings) for p in pattern.params))
    return pattern


def _resolve(call: cel_ast.Call, arg_types: list[Type]) -> tuple[list[str], Type]:
    """The overloads the checker would keep for `call`, and the call's type."""
    ids: list[str] = []
    result: Type | None = None
    for overload in _OVERLOADS.get(call.function, []):
        if overload.member != (call.target is not None) or len(overload.params) != len(arg_types):
            continue
        bindings: dict[str, list[Type]] = {}
        if not all(_match(p, a, bindings) for p, a in zip(overload.params, arg_types, strict=True)):
            continue
        ids.append(overload.id)
        t = _substitute(overload.result, bindings)
        result = t if result is None or result == t else DYN
    return ids, result if result is not None else DYN


# --- The type pass -------------------------------------------------------------------------


class Checker:
    """Types every node, as far as costs need: the result type of each call and the
    overloads that may run (`overloads`), the type of every other node."""

    def __init__(self) -> None:
        self.types: dict[int, Type] = {}
        self.overloads: dict[int, list[str]] = {}
        self._scopes: dict[str, list[Type]] = {}

    def check(self, e: cel_ast.Expr) -> Type:
        t = self._check(e)
        self.types[e.id] = t
        return t

    def _check(self, e: cel_ast.Expr) -> Type:
        match e:
            case cel_ast.Literal(kind=kind):
                return Type(kind)
            case cel_ast.Ident(name=name):
                if self._scopes.get(name):  # a leading dot (root scope) never names a local
                    return self._scopes[name][-1]
                name = name.removeprefix(".")
                if name == _DEVICE:
                    return _DEVICE_TYPE
                return _TYPE if name in _TYPE_NAMES else DYN
            case cel_ast.Select(operand=operand, field=name, test_only=test_only):
                t = self.check(operand)
                if test_only:
                    return _BOOL
                if t == _DEVICE_TYPE:
                    return _DEVICE_FIELDS.get(name, DYN)
                return t.params[1] if t.kind == "map" else DYN
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
                return Type("struct", name=name)
            case cel_ast.Comprehension():
                return self._comprehension(e)
        raise TypeError(f"not a CEL expression: {e!r}")

    def _call(self, e: cel_ast.Call) -> Type:
        arg_types = [self.check(arg) for arg in e.args]
        if e.target is not None:
            arg_types.insert(0, self.check(e.target))
        ids, t = _resolve(e, arg_types)
        self.overloads[e.id] = ids
        return t

    def _comprehension(self, e: cel_ast.Comprehension) -> Type:
        range_type = self.check(e.iter_range)
        # A list's elements, a map's keys.
        iter_type = range_type.params[0] if range_type.kind in ("list", "map") else DYN
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

    def _push(self, name: str, t: Type) -> None:
        self._scopes.setdefault(name, []).append(t)

    def _pop(self, name: str) -> None:
        self._scopes[name].pop()
