"""The per-kind strategies (`drasim.apistore.strategies`): every served kind has one."""

from __future__ import annotations

import pytest

from drasim.apistore import strategies
from drasim.common.api import meta_v1, registry, resource_v1


def test_every_served_kind_has_a_strategy():
    for info in registry.RESOURCES:
        assert isinstance(strategies.for_resource(info.plural), strategies.Strategy), info.plural


@pytest.mark.parametrize(
    ("plural", "kind", "generation"),
    [
        ("deviceclasses", resource_v1.DeviceClass, 1),
        ("resourceslices", resource_v1.ResourceSlice, 1),
        # Upstream's resourceclaim and resourceclaimtemplate strategies set none.
        ("resourceclaims", resource_v1.ResourceClaim, None),
        ("resourceclaimtemplates", resource_v1.ResourceClaimTemplate, None),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_which_resource_kinds_count_generations(plural: str, kind: type, generation: int | None):
    obj = kind(metadata=meta_v1.ObjectMeta(name="x"))
    strategies.for_resource(plural).prepare_for_create(obj)
    assert (obj.metadata.generation or None) == generation
