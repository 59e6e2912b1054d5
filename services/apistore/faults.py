"""Fault plans: fail the Nth write of a kind and verb with a given status, or apply it and
hold back the answer (so the client times out on a write that happened).

Switched off unless asked for (`DRASIM_FAULT_PLAN` or the control subject). Used by the
scheduler's failure-path tests to make PreBind's API writes fail exactly where they want.
"""

from __future__ import annotations

import msgspec

from drasim.common import errors


class FaultRule(msgspec.Struct, kw_only=True):
    """Fail matching writes number `nth`..`nth+times-1` (1-based, counted per rule)."""

    resource: str  # plural, e.g. "resourceclaims"
    verb: str  # create | update | patch | delete | bind
    subresource: str = ""  # "" or "status"
    nth: int = 1
    times: int = 1
    code: int = 500
    # The Status reason, for a code several kinds share (409: "Conflict"); empty: the
    # first kind with that code.
    reason: str = ""
    message: str = "injected fault"
    # > 0: the write is applied, but its answer goes out only after this many seconds.
    delay_reply_seconds: float = 0.0
    seen: int = 0

    def matches(self, resource: str, verb: str, subresource: str) -> bool:
        return self.resource == resource and self.verb == verb and self.subresource == subresource


class FaultPlan(msgspec.Struct, kw_only=True):
    rules: list[FaultRule] = []

    def check(self, resource: str, verb: str, subresource: str = "") -> None:
        """Raise the planned error if this write is one the plan fails."""
        for rule in self.rules:
            if rule.delay_reply_seconds > 0 or not rule.matches(resource, verb, subresource):
                continue
            rule.seen += 1
            if rule.nth <= rule.seen < rule.nth + rule.times:
                message = (
                    f"{rule.message} ({verb} {resource}"
                    f"{'/' + subresource if subresource else ''} #{rule.seen})"
                )
                raise errors.ApiError.from_status(
                    errors.Status(code=rule.code, reason=rule.reason, message=message)
                )

    def reply_delay(self, resource: str, verb: str, subresource: str = "") -> float:
        """Seconds to hold back the answer to this (applied) write; 0 for most."""
        for rule in self.rules:
            if rule.delay_reply_seconds <= 0 or not rule.matches(resource, verb, subresource):
                continue
            rule.seen += 1
            if rule.nth <= rule.seen < rule.nth + rule.times:
                return rule.delay_reply_seconds
        return 0.0


plan_decoder = msgspec.json.Decoder(FaultPlan)


def parse(text: str) -> FaultPlan:
    """A plan from JSON (`{"rules": [{"resource": "pods", "verb": "patch", ...}]}`)."""
    try:
        return plan_decoder.decode(text)
    except msgspec.DecodeError as exc:
        raise errors.BadRequest(f"invalid fault plan: {exc}") from exc
