"""What a LIST's `resourceVersion`, `resourceVersionMatch` and `continue` ask for, and the
errors upstream answers when the store cannot serve it.

As kube-apiserver (https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list;
`ValidateListOptions` in `apimachinery/pkg/apis/meta/internalversion/validation`,
`storage.ValidateListOptions`, the cacher's `shouldDelegateList`):

- `resourceVersion` "" is the most recent state; "0" any state, drasim's most recent.
- `resourceVersionMatch=NotOlderThan` (or no match and no `limit`): a state at least as new
  as the resourceVersion, drasim's most recent; one past the log's end is waited for, then
  answered `504 Timeout`, "Too large resource version", as the watch cache does.
- `resourceVersionMatch=Exact` (or no match with a `limit`, the "legacy" exact read): the
  state at exactly that resourceVersion, from the event log; one older than the log's
  compaction answers `410 Expired`, "The resourceVersion for the provided list is too old."
- `continue`: the token carries the resourceVersion of the list's first page, so every
  page is of that one state; once compacted, `410 Expired` with upstream's message and,
  in the Status' `metadata.continue`, a token that lists the rest at the latest state.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass

import msgspec

from drasim.common import errors
from drasim.common.api import registry
from drasim.common.bus import messages

__all__ = [
    "EXACT",
    "NOT_OLDER_THAN",
    "ListRead",
    "check_watch_options",
    "encode_continue",
    "expired",
    "parse_resource_version",
    "read_for",
    "too_large_resource_version",
]

NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"

# Upstream's messages (`storage/etcd3/errors.go`).
EXPIRED = "The resourceVersion for the provided list is too old."
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter."
)
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the list."
)
# The watch cache's wait for a resourceVersion it has not seen (`blockTimeout`), and the
# retry-after of its "too large" answer (`resourceVersionTooHighRetrySeconds`).
FRESHNESS_WAIT_SECONDS = 3.0
TOO_LARGE_RETRY_SECONDS = 1

# The event log's sequence is a Postgres bigint: no event has a resourceVersion past this.
LAST_POSSIBLE_RESOURCE_VERSION = 2**63 - 1
_DECIMAL = re.compile(r"[0-9]+")
_CONTINUE_VERSION = "meta.k8s.io/v1"
# A continue token's resourceVersion that means "the latest" (upstream's -1: 0 would be a
# bad token).
LATEST = -1


class _ContinueToken(msgspec.Struct):
    """Upstream's continue token (`storage.EncodeContinue`): base64url (no padding) JSON;
    `start` is drasim's `<namespace>/<name>` of the last object listed."""

    v: str = ""
    rv: int = 0
    start: str = ""


@dataclass(frozen=True, slots=True)
class ListRead:
    """Which state a LIST reads: at exactly `at` (None: the most recent), at least as new as
    `not_older_than`, from after `after` (a continue token's (namespace, name))."""

    at: int | None = None
    not_older_than: int = 0
    after: tuple[str, str] | None = None

    @property
    def paging(self) -> bool:
        return self.after is not None


def parse_resource_version(value: str, info: registry.ResourceInfo) -> int | None:
    """A request's resourceVersion; None for "" and "0" (no particular one).

    Parsed as upstream's `ParseResourceVersion` (Go's `strconv.ParseUint`, base 10): anything
    else is upstream's 422 naming `resourceVersion`. A version past every possible event is
    the last possible one."""
    if value in ("", "0"):
        return None
    if not _DECIMAL.fullmatch(value):
        problem = "invalid syntax"
    elif int(value) >= 2**64:
        problem = "value out of range"
    else:
        return min(int(value), LAST_POSSIBLE_RESOURCE_VERSION)
    quoted = json.dumps(value, ensure_ascii=False)
    detail = f"strconv.ParseUint: parsing {quoted}: {problem}"
    raise _invalid(
        info.plural, info.group, [errors.field_invalid("resourceVersion", value, detail)]
    )


def read_for(req: messages.List, info: registry.ResourceInfo) -> ListRead:
    """What `req` asks to read, checked in upstream's order: the options (422
    `ListOptions.meta.k8s.io`), the resourceVersion (422), the continue token (400)."""
    errs = _check_options(req)
    if errs:
        raise _invalid("ListOptions", "meta.k8s.io", errs)
    rv = parse_resource_version(req.resource_version, info)
    if req.continue_token:
        after, token_rv = _decode_continue(req.continue_token)
        if rv is not None:
            raise errors.BadRequest(
                "specifying resource version is not allowed when using continue"
            )
        return ListRead(at=None if token_rv == LATEST else token_rv, after=after)
    if rv is None:
        return ListRead()
    match = req.resource_version_match
    if match == EXACT or (not match and req.limit > 0):
        return ListRead(at=rv)
    return ListRead(not_older_than=rv)


def encode_continue(after: tuple[str, str], resource_version: int) -> str:
    """The token of the page after `after` of the list at `resource_version`."""
    token = _ContinueToken(_CONTINUE_VERSION, resource_version, f"{after[0]}/{after[1]}")
    return base64.urlsafe_b64encode(msgspec.json.encode(token)).rstrip(b"=").decode()


def expired(read: ListRead) -> errors.Expired:
    """The 410 for a read the compacted log no longer holds: a continued list gets a token
    for the rest at the latest state, as upstream's `handleCompactedErrorForPaging`."""
    if read.after is None:
        return errors.Expired(EXPIRED)
    return errors.Expired(INCONSISTENT_CONTINUE, continue_token=encode_continue(read.after, LATEST))


def too_large_resource_version(minimum: int, current: int) -> errors.Timeout:
    """Upstream's `storage.NewTooLargeResourceVersionError`: 504, reason Timeout, a
    `ResourceVersionTooLarge` cause and a retry-after."""
    return errors.Timeout(
        f"Timeout: Too large resource version: {minimum}, current: {current}",
        causes=[
            errors.StatusCause(
                reason="ResourceVersionTooLarge", message="Too large resource version"
            )
        ],
        retry_after_seconds=TOO_LARGE_RETRY_SECONDS,
    )


def check_watch_options(
    resource_version_match: str, send_initial_events: bool | None, continue_token: str
) -> None:
    """Upstream's `ValidateListOptions` for a watch (`validateWatchOptions`, the WatchList
    feature on, as it is by default): `resourceVersionMatch` only with `sendInitialEvents`,
    and then `NotOlderThan`; 422 `ListOptions.meta.k8s.io` otherwise."""
    errs: list[errors.FieldError] = []
    match = resource_version_match
    if send_initial_events is not None and match != NOT_OLDER_THAN:
        errs.append(
            errors.field_forbidden(
                "resourceVersionMatch",
                f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}",
            )
        )
    if match:
        if send_initial_events is None:
            errs.append(
                errors.field_forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            )
        if match != NOT_OLDER_THAN:
            errs.append(errors.field_not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
        if continue_token:
            errs.append(
                errors.field_forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
    if errs:
        raise _invalid("ListOptions", "meta.k8s.io", errs)


def _check_options(req: messages.List) -> list[errors.FieldError]:
    """Upstream's `ValidateListOptions` for a list (not a watch)."""
    errs = _check_match(req) if req.resource_version_match else []
    if req.send_initial_events is not None:
        errs.append(
            errors.field_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
        )
    return errs


def _check_match(req: messages.List) -> list[errors.FieldError]:
    errs: list[errors.FieldError] = []
    match = req.resource_version_match
    if not req.resource_version:
        errs.append(
            errors.field_forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            )
        )
    if req.continue_token:
        errs.append(
            errors.field_forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            )
        )
    if match not in (EXACT, NOT_OLDER_THAN):
        errs.append(
            errors.field_not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""])
        )
    if match == EXACT and req.resource_version == "0":
        errs.append(
            errors.field_forbidden(
                "resourceVersionMatch",
                'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
            )
        )
    return errs


def _decode_continue(token: str) -> tuple[tuple[str, str], int]:
    """(namespace, name) to list after, and the resourceVersion to list at (`LATEST`: the
    most recent), as upstream's `storage.DecodeContinue` checks a token."""
    try:
        data = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        decoded = msgspec.json.decode(data, type=_ContinueToken)
    except (binascii.Error, ValueError, msgspec.DecodeError) as exc:
        raise _bad_continue(f"continue key is not valid: {exc}") from exc
    if decoded.v != _CONTINUE_VERSION:
        raise _bad_continue(
            f"continue key is not valid: server does not recognize this encoded version {decoded.v}"
        )
    if decoded.rv == 0 or decoded.rv < LATEST:
        raise _bad_continue(
            "continue key is not valid: incorrect encoded start resourceVersion (version "
            "meta.k8s.io/v1)"
        )
    namespace, slash, name = decoded.start.partition("/")
    # Postgres text never holds a NUL: never in a token we made.
    if not slash or not name or "\0" in decoded.start:
        raise _bad_continue(
            "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
            if not decoded.start
            else "continue key is not valid"
        )
    return (namespace, name), decoded.rv


def _bad_continue(why: str) -> errors.BadRequest:
    return errors.BadRequest(f"invalid continue token: {why}")


def _invalid(kind: str, group: str, errs: list[errors.FieldError]) -> errors.Invalid:
    """Upstream's 422 for bad request parameters (`errors.NewInvalid` with an empty name)."""
    return errors.invalid(kind, "", errs, group=group, keep_empty_name=True)
