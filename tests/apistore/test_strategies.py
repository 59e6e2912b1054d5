"""The per-kind strategies (`drasim.apistore.strategies`): every served kind has one."""

from __future__ import annotations

from drasim.apistore import strategies
from drasim.common.api import registry


def test_every_served_kind_has_a_strategy():
    for info in registry.RESOURCES:
        assert isinstance(strategies.for_resource(info.plural), strategies.Strategy), info.plural
