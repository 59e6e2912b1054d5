"""Fault plans: fail the Nth write of a kind and verb with a given status.

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
    message: str = "injected fault"
    seen: int = 0

    def matches(self, resource: str, verb: str, subresource: str) -> bool:
        return self.resource == resource and self.verb == verb and self.subresource == subresource


class FaultPlan(msgspec.Struct, kw_only=True):
    rules: list[FaultRule] = []

    def check(self, resource: str, verb: str, subresource: str = "") -> None:
        """Raise the planned error if this write is one the plan fails."""
        for rule in self.rules:
            if not rule.matches(resource, verb, subresource):
                continue
            rule.seen += 1
            if rule.nth <= rule.seen < rule.nth + rule.times:
                raise errors.error_for_code(rule.code)(
                    f"{rule.message} ({verb} {resource}"
                    f"{'/' + subresource if subresource else ''} #{rule.seen})"
                )


plan_decoder = msgspec.json.Decoder(FaultPlan)


def parse(text: str) -> FaultPlan:
    """A plan from JSON (`{"rules": [{"resource": "pods", "verb": "patch", ...}]}`)."""
    try:
        return plan_decoder.decode(text)
    except msgspec.DecodeError as exc:
        raise errors.BadRequest(f"invalid fault plan: {exc}") from exc
