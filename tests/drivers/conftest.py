"""Driver shims over an emulated probe of the built-in profiles."""

from __future__ import annotations

import pytest

from drasim.common import cluster_file
from drasim.drivers.probe import EmulatedProbe


@pytest.fixture
def gpu8() -> EmulatedProbe:
    (node,) = [n for n in cluster_file.load().nodes if n.profile.name == "gpu-8"]
    return EmulatedProbe(node.profile)


@pytest.fixture
def gpu2() -> EmulatedProbe:
    (node,) = [n for n in cluster_file.load().nodes if n.profile.name == "gpu-2"]
    return EmulatedProbe(node.profile)
