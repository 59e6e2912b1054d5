"""The one place that encodes and decodes API objects (JSON on the wire, YAML from users).

msgspec does the work; the hooks here teach it `Quantity`, which arrives as `1`, `0.5` or
`"500m"` and always leaves as its canonical string, as Kubernetes writes it.
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeVar

import msgspec
import yaml

from drasim.common.errors import FieldError
from drasim.common.quantity import Quantity, parse_quantity

__all__ = [
    "MAX_DEPTH",
    "DecodeLimitError",
    "convert",
    "decode",
    "decode_errors",
    "encode",
    "load_json",
    "load_yaml_documents",
    "to_builtins",
]

T = TypeVar("T")


# Quantities are immutable and a cluster uses few distinct ones, so parsing (exact
# `Fraction` arithmetic) and formatting are memoised: the write path decodes and encodes the
# same few values ("100m", "1", "64Mi") for every object. Both caches are bounded; when one
# is full it is emptied and refills with the values in use.
_CACHE_MAX = 4096
# (type, JSON value) -> Quantity; the type keeps 1, 1.0 and True apart.
_PARSED: dict[tuple[type, Any], Quantity] = {}
# id(quantity) -> (quantity, canonical string); holding the quantity keeps its id unique.
_FORMATTED: dict[int, tuple[Quantity, str]] = {}


def _quantity_string(q: Quantity) -> str:
    hit = _FORMATTED.get(id(q))
    if hit is not None and hit[0] is q:
        return hit[1]
    text = str(q)
    if len(_FORMATTED) >= _CACHE_MAX:
        _FORMATTED.clear()
    _FORMATTED[id(q)] = (q, text)
    return text


def _parse_quantity(obj: Any) -> Quantity:
    key = (obj.__class__, obj)
    try:
        hit = _PARSED.get(key)
    except TypeError:  # unhashable (a list or a dict where a quantity belongs)
        return parse_quantity(obj)
    if hit is not None:
        return hit
    q = parse_quantity(obj)
    if len(_PARSED) >= _CACHE_MAX:
        _PARSED.clear()
    _PARSED[key] = q
    return q


def _enc_hook(obj: Any) -> Any:
    if obj.__class__ is Quantity:
        return _quantity_string(obj)
    if isinstance(obj, Quantity):
        return str(obj)
    raise NotImplementedError(f"cannot encode objects of type {type(obj).__name__}")


def _dec_hook(type_: type, obj: Any) -> Any:
    if type_ is Quantity:
        # A ValueError here becomes a msgspec.ValidationError carrying the field path.
        return _parse_quantity(obj)
    raise NotImplementedError(f"cannot decode into {type_!r}")


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


@functools.cache
def _decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(type_, dec_hook=_dec_hook)


@functools.cache
def field_names(type_: type) -> tuple[tuple[str, str], ...]:
    """(attribute, wire name) of each field of the struct type `type_`. Cached:
    `msgspec.structs.fields` resolves every annotation of the class on each call, and a
    controller writing hundreds of statuses a second spent an eighth of its time there."""
    return tuple((f.name, f.encode_name) for f in msgspec.structs.fields(type_))


def encode(obj: Any) -> bytes:
    """JSON bytes for an API object (or any structure of them)."""
    return _ENCODER.encode(obj)


def decode(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into `type_`; raises msgspec.DecodeError or msgspec.ValidationError.

    Kubernetes reads a JSON `null` as "field absent"; msgspec rejects null for a non-optional
    field, so on a validation error the document is retried with nulls dropped.
    """
    try:
        return _decoder(type_).decode(data)
    except msgspec.ValidationError:
        builtins = msgspec.json.decode(data)
        return convert(builtins, type_)


def clone(obj: T) -> T:
    """A deep copy of an API object, through its JSON: msgspec encodes and decodes in C,
    where `copy.deepcopy` walks the Structs in Python."""
    return _decoder(type(obj)).decode(_ENCODER.encode(obj))


def convert(obj: Any, type_: type[T]) -> T:
    """Turn builtins (e.g. a dict from YAML) into `type_`; nulls count as absent."""
    return msgspec.convert(_drop_nulls(obj), type_, dec_hook=_dec_hook)


def to_builtins(obj: Any) -> Any:
    """Dicts, lists and scalars for an API object, as they would appear in JSON."""
    return msgspec.to_builtins(obj, enc_hook=_enc_hook)


# -- decoding what users send -------------------------------------------------------------
#
# Request bodies are decoded with upstream's limits, so that no body costs more than its size:
# a nesting depth (Go's encoding/json and go-yaml stop at 10000) and go-yaml's bound on alias
# expansion (the "billion laughs" fix, CVE-2019-11253). drasim's depth is lower than 10000:
# Python recursion (msgspec, and the walks over the builtins behind it) stops near 1000
# levels, and a decoded body must survive every walk; Kubernetes objects nest some 15 deep.
MAX_DEPTH = 100

# go-yaml (`allowedAliasRatio`): up to 400,000 decode steps 99% may come from aliases, from
# 4,000,000 on 10%, linearly in between; checked once 1000 steps and 100 aliased ones are made.
_ALIAS_RATIO_RANGE_LOW = 400_000
_ALIAS_RATIO_RANGE_HIGH = 4_000_000


class DecodeLimitError(ValueError):
    """A body past a decoding limit; the message is upstream's (`exceeded max depth`,
    `yaml: document contains excessive aliasing`)."""


def load_json(data: bytes | str) -> Any:
    """The builtins of a JSON document, at most MAX_DEPTH deep.

    Raises msgspec.DecodeError for malformed JSON and DecodeLimitError past the depth.
    """
    try:
        obj = msgspec.json.decode(data)
    except RecursionError:
        raise _depth_error("{" if data.lstrip()[:1] in (b"{", "{") else "[") from None
    raw = data.encode() if isinstance(data, str) else data
    # Fewer brackets than the limit cannot nest deeper than it: most bodies stop here.
    if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH:
        _check_depth(obj)
    return obj


def _depth_error(bracket: str) -> DecodeLimitError:
    # Go's encoding/json: `invalid character '{' exceeded max depth`.
    return DecodeLimitError(f"invalid character '{bracket}' exceeded max depth of {MAX_DEPTH}")


def _check_depth(obj: Any) -> None:
    """Walk the containers without recursion; raise at the first one past MAX_DEPTH."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _depth_error("{" if isinstance(value, dict) else "[")
        children = value.values() if isinstance(value, dict) else value
        stack.extend((v, depth + 1) for v in children if isinstance(v, dict | list))
    return None


def _allowed_alias_ratio(decodes: int) -> float:
    if decodes <= _ALIAS_RATIO_RANGE_LOW:
        return 0.99
    if decodes >= _ALIAS_RATIO_RANGE_HIGH:
        return 0.10
    span = _ALIAS_RATIO_RANGE_HIGH - _ALIAS_RATIO_RANGE_LOW
    return 0.99 - 0.89 * (decodes - _ALIAS_RATIO_RANGE_LOW) / span


class _KubeYamlLoader(yaml.SafeLoader):
    """Safe loading, but unquoted timestamps stay strings, as Kubernetes' YAML→JSON does;
    with MAX_DEPTH and go-yaml's alias bound.

    PyYAML composes an alias as the very node its anchor names, so the document it builds is
    small; what costs is everything after, which sees the expansion. The composer therefore
    counts go-yaml's decode steps as go-yaml would take them, in document order: one per
    node, and an alias adds its anchor's whole expansion (counted when the anchor was
    composed) as aliased steps.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._decodes = 0
        self._aliased = 0
        self._expansion: dict[int, int] = {}  # id(anchored node) -> its decode steps

    def fetch_flow_collection_start(self, TokenClass: type[yaml.Token]) -> None:  # noqa: N803
        # The scanner looks ahead of the composer, keeping a possible key per open bracket
        # and checking all of them per token: a long line of `[` costs as many squared.
        if self.flow_level >= MAX_DEPTH:
            raise DecodeLimitError(f"yaml: exceeded max depth of {MAX_DEPTH}")
        super().fetch_flow_collection_start(TokenClass)

    def compose_document(self) -> yaml.Node | None:
        self._decodes = self._aliased = 0
        self._expansion = {}
        self._count(1, 0)  # the document node
        return super().compose_document()

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            anchor = self.peek_event().anchor
            node = super().compose_node(parent, index)
            expansion = self._expansion.get(id(node))
            if expansion is None:  # the alias sits inside its own anchor
                raise yaml.composer.ComposerError(
                    None, None, f"yaml: anchor '{anchor}' value contains itself"
                )
            self._count(1, 0)
            self._count(expansion, expansion)
            return node
        event = self.peek_event()
        collection = not isinstance(event, yaml.ScalarEvent)
        if collection:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise DecodeLimitError(f"yaml: exceeded max depth of {MAX_DEPTH}")
        start = self._decodes
        self._count(1, 0)
        node = super().compose_node(parent, index)
        if collection:
            self._depth -= 1
        if event.anchor is not None:
            self._expansion[id(node)] = self._decodes - start
        return node

    def _count(self, decodes: int, aliased: int) -> None:
        """go-yaml's check, made after each node and after each alias's expansion (within
        one expansion the aliased share only grows, so its end is where it is largest)."""
        self._decodes += decodes
        self._aliased += aliased
        if (
            self._aliased > 100
            and self._decodes > 1000
            and self._aliased / self._decodes > _allowed_alias_ratio(self._decodes)
        ):
            raise DecodeLimitError("yaml: document contains excessive aliasing")


_KubeYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml_documents(text: str) -> list[dict[str, Any]]:
    """Every non-empty document of a (multi-document) YAML text.

    Raises yaml.YAMLError for malformed YAML and DecodeLimitError past MAX_DEPTH or for
    excessive aliasing.
    """
    return [doc for doc in yaml.load_all(text, Loader=_KubeYamlLoader) if doc]


def _drop_nulls(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_nulls(v) for v in obj]
    return obj


# msgspec: "<message> - at `$.spec.containers[0].name`"; the path is absent at the root.
_ERROR_RE = re.compile(r"(?P<message>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
_MISSING_FIELD_RE = re.compile(r"Object missing required field `(?P<field>[^`]+)`")


def decode_errors(exc: msgspec.ValidationError, source: Any = None) -> list[FieldError]:
    """Kubernetes-style field errors for a msgspec validation error.

    The JSON path `$.spec.containers[0].name` becomes the field path
    `spec.containers[0].name`; a missing field is reported at the field itself. msgspec
    names a map entry `[...]`; given the decoded body as `source`, the entry's key is put
    in its place where the body tells which entry failed (`limits[cpu]`).
    """
    match = _ERROR_RE.fullmatch(str(exc))
    assert match is not None  # the pattern matches any text
    message, path = match["message"], (match["path"] or "").removeprefix(".")
    if source is not None and _ANY_KEY in path:
        path = _with_keys(path, source, message)
    missing = _MISSING_FIELD_RE.fullmatch(message)
    if missing:
        field = f"{path}.{missing['field']}" if path else missing["field"]
        return [FieldError("FieldValueRequired", field, "Required value")]
    if message.startswith("Expected `"):
        return [FieldError("FieldValueTypeInvalid", path, message)]
    return [FieldError("FieldValueInvalid", path, message)]


_ANY_KEY = "[...]"
_PATH_PART = re.compile(r"\.?([^.\[]+)|\[(\d+)\]|(\[\.\.\.\])")
_GOT_RE = re.compile(r"Expected `[^`]*`, got `(?P<got>[^`]+)`")
_JSON_TYPES = {str: "str", bool: "bool", int: "int", float: "float", list: "array", dict: "object"}


def _with_keys(path: str, source: Any, message: str) -> str:
    """`path` with each `[...]` replaced by the key of the first map entry of `source` under
    which the rest of the path leads to a value the message fits (kept where none does)."""
    parts = [(m[1], m[2], m[3]) for m in _PATH_PART.finditer(path)]
    shown, node = [], source
    for i, (name, index, any_key) in enumerate(parts):
        if name is not None:
            node = node.get(name) if isinstance(node, dict) else None
            shown.append(f".{name}")
        elif index is not None:
            at = int(index)
            node = node[at] if isinstance(node, list) and at < len(node) else None
            shown.append(f"[{index}]")
        else:
            entries = node if isinstance(node, dict) else {}
            fitting = [k for k, v in entries.items() if _fits(_leaf(v, parts[i + 1 :]), message)]
            # msgspec stops at the first failing entry in order, and an earlier entry the
            # message fits as well would have failed the same way: the first one is it.
            key = fitting[0] if fitting else next(iter(entries)) if len(entries) == 1 else None
            shown.append(f"[{key}]" if key is not None else any_key)
            node = node[key] if key is not None else None
    return "".join(shown).removeprefix(".")


_UNREACHED = object()


def _leaf(node: Any, parts: list[tuple[str | None, str | None, str | None]]) -> Any:
    for name, index, _ in parts:
        if name is not None and isinstance(node, dict) and name in node:
            node = node[name]
        elif index is not None and isinstance(node, list) and int(index) < len(node):
            node = node[int(index)]
        else:
            return _UNREACHED
    return node


def _fits(value: Any, message: str) -> bool:
    """Whether the message is about `value`: of the type it says it got, or the value it
    quotes (`invalid quantity 'lots'`)."""
    if value is _UNREACHED:
        return False
    got = _GOT_RE.match(message)
    if got:
        return _JSON_TYPES.get(type(value), "null" if value is None else "") == got["got"]
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return f"'{value}'" in message or f'"{value}"' in message
    return False
