"""Strategies of admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies and their
bindings (upstream `pkg/registry/admissionregistration/validatingadmissionpolicy/`): stored
as written; a policy's status is its type-checking controller's, which drasim does not run.
"""

from __future__ import annotations

from drasim.apistore.strategies.base import Strategy

__all__ = ["STRATEGIES"]


class ValidatingAdmissionPolicyStrategy(Strategy):
    status_subresource = True
    generation = True


STRATEGIES: dict[str, Strategy] = {
    "validatingadmissionpolicies": ValidatingAdmissionPolicyStrategy(),
    "validatingadmissionpolicybindings": Strategy(),
}
