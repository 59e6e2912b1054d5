"""The system fields of ObjectMeta the apistore sets (upstream `rest.FillObjectMetaSystemFields`
and `storage/names`): uids, timestamps, names made from `generateName`, and what an update
keeps of the stored metadata.
"""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "GENERATE_NAME_TRIES",
    "after",
    "generate_name",
    "keep_system_fields",
    "new_uid",
    "now_rfc3339",
]

# Kubernetes' generated-name limits: the base is cut to 58 characters, then 5 random ones.
GENERATE_NAME_BASE_MAX = 58
GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATE_NAME_SUFFIX_LEN = 5
# Names a `generateName` create reads with its batch: the first one free is taken, so a
# collision of the random characters retries there, as the apiserver retries.
GENERATE_NAME_TRIES = 4

# The second last formatted (the instant and its UTC offset) and its text.
_formatted: tuple[tuple[int, Any], str] = ((0, None), "")


def now_rfc3339(now: datetime | None = None) -> str:
    """Kubernetes timestamps: RFC 3339, UTC, whole seconds (formatted once a second: a
    batch stamps many objects within the same one)."""
    global _formatted
    now = now or datetime.now(UTC)
    second = (int(now.timestamp()), now.utcoffset())
    if _formatted[0] != second:
        _formatted = (second, now.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _formatted[1]


# The last second a Kubernetes timestamp (RFC 3339, year 9999 at most) can name.
_LAST_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def after(now: datetime, seconds: int) -> datetime:
    """`seconds` after `now`, or the last time there is: a grace period is any int64, and
    most of them end past the calendar (upstream's duration arithmetic would wrap)."""
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        return _LAST_TIME


# Random hex digits for `new_uid`, drawn from the OS 4 KiB at a time (not 16 bytes a uid).
_random_hex = ""
_random_at = 0


def _forget_random_hex() -> None:
    global _random_hex, _random_at
    _random_hex, _random_at = "", 0


os.register_at_fork(after_in_child=_forget_random_hex)  # a child never repeats our uids


def new_uid() -> str:
    """A random (version 4) UUID as `str(uuid.uuid4())` writes it, from the same source
    (`os.urandom`), but drawing many uids' bytes in one system call."""
    global _random_hex, _random_at
    if _random_at >= len(_random_hex):
        _random_hex, _random_at = os.urandom(4096).hex(), 0
    h = _random_hex[_random_at : _random_at + 32]
    _random_at += 32
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


# Names need to be unlikely to collide, not unpredictable (upstream's `utilrand.String` is
# math/rand): a seeded PRNG, not `secrets`, which reads the OS per character.
_name_random = random.Random(os.urandom(16))


def generate_name(base: str) -> str:
    """`generateName` + 5 random characters from Kubernetes' alphabet (base cut to 58)."""
    suffix = "".join(_name_random.choices(GENERATE_NAME_ALPHABET, k=GENERATE_NAME_SUFFIX_LEN))
    return base[:GENERATE_NAME_BASE_MAX] + suffix


# Fields of ObjectMeta a client may not change on update.
_SYSTEM_FIELDS = (
    "uid",
    "creation_timestamp",
    "deletion_timestamp",
    "deletion_grace_period_seconds",
    "generation",
    "namespace",
    "name",
    "generate_name",
)


def keep_system_fields(new: Any, old: Any) -> None:
    """Give an update's object the stored values of the fields a client may not change."""
    for name in _SYSTEM_FIELDS:
        setattr(new.metadata, name, getattr(old.metadata, name))
