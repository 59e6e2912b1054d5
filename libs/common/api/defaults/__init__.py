"""API defaulting: the values the API server fills in for fields a client left out, so that
an object reads back as a real cluster stores it (`kubectl get -o yaml`) and a later
`kubectl apply` of the same manifest finds nothing to change.

`apply(obj)` defaults an object of any kind that has defaults, as upstream's scheme does
when it decodes a request body, before admission and validation. One module per API group
as upstream's `pkg/apis/<group>/v1/defaults.go` (`core`, `apps`, `batch`, `resource`), each
with its kinds' `DEFAULTERS`; a kind with defaults adds its function to its group's table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drasim.common.api.defaults import apiextensions, apps, batch, core, core_app, resource

__all__ = ["apply", "register"]

_DEFAULTERS: dict[type, Callable[[Any], None]] = {
    **core.DEFAULTERS,
    **core_app.DEFAULTERS,
    **apiextensions.DEFAULTERS,
    **apps.DEFAULTERS,
    **batch.DEFAULTERS,
    **resource.DEFAULTERS,
}


def apply(obj: Any) -> None:
    """Fill in the defaults of `obj`, in place; kinds without defaults are left alone."""
    defaulter = _DEFAULTERS.get(type(obj))
    if defaulter is not None:
        defaulter(obj)


def register(type_: type, defaulter: Callable[[Any], None] | None) -> None:
    """Default the objects of a kind made at run time (a custom resource) with
    `defaulter`; None forgets the kind."""
    if defaulter is None:
        _DEFAULTERS.pop(type_, None)
    else:
        _DEFAULTERS[type_] = defaulter
