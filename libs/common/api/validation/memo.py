"""Memoisation of pure checks that the write path repeats object after object.

A cluster repeats the same names, labels and pod specs in every object it writes (pods of
one template above all), and each write validates its object whole; these decorators
answer a repeated check from memory. The checks are pure, so forgetting costs only time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from drasim.common import codec
from drasim.common.errors import FieldError

__all__ = ["by_content", "by_items", "strings"]

_MEMO_MAX = 4096


def _remembered(
    memo: dict[Any, tuple[Any, ...]], key: Any, check: Callable[..., list[Any]], *args: Any
) -> list[Any]:
    """`check(*args)`, answered from `memo` under `key` when asked before (the memo is
    emptied when full: the checks are pure, so forgetting costs only time)."""
    found = memo.get(key)
    if found is None:
        found = tuple(check(*args))
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[key] = found
    return list(found)


def strings(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """Remember a pure string check's messages: a cluster repeats the same names, label keys
    and values in every object, and the write path validates each object it writes."""
    memo: dict[str, tuple[str, ...]] = {}

    @functools.wraps(check)
    def cached(value: str) -> list[str]:
        return _remembered(memo, value, check, value)

    return cached


def by_content(
    check: Callable[[Any, str], list[FieldError]],
) -> Callable[[Any, str], list[FieldError]]:
    """Remember a pure check of a struct at a path, keyed by the struct's JSON: pods made
    from one template (a ReplicaSet's, a benchmark's) share their spec, and each write of
    each pod validates it again. Equal JSON means equal field values (quantities print
    canonically), so the answer is the same; `FieldError`s are frozen, so sharing them is
    safe."""
    memo: dict[tuple[str, bytes], tuple[FieldError, ...]] = {}

    @functools.wraps(check)
    def cached(value: Any, path: str) -> list[FieldError]:
        return _remembered(memo, (path, codec.encode(value)), check, value, path)

    return cached


def by_items(
    check: Callable[[Mapping[str, str], str], list[FieldError]],
) -> Callable[[Mapping[str, str], str], list[FieldError]]:
    """Remember a pure check of a string map at a path, keyed by its items: objects made
    from one template carry the same labels and annotations, and one check of the whole
    map costs less than a memo lookup per key and value. `FieldError`s are frozen."""
    memo: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[FieldError, ...]] = {}

    @functools.wraps(check)
    def cached(values: Mapping[str, str], path: str) -> list[FieldError]:
        if not values:
            return check(values, path)
        return _remembered(memo, (path, tuple(values.items())), check, values, path)

    return cached
