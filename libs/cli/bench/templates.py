"""The objects a workload creates: its templates, rendered per index, and the
ResourceSlice upstream's `createResourceDriver` op publishes for a node."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import yaml

from drasim.common.api import registry


class Template:
    """An object template, parsed once; `render(i)` is the JSON of object number i.

    Placeholders are upstream's Go template forms that the workloads use: `{{.Index}}` and
    `{{Mod .Index N}}`. They sit inside YAML strings, so they are substituted in the JSON
    text, with no YAML parse per object.
    """

    _PLACEHOLDER = re.compile(r"\{\{\s*(?:\.Index|Mod\s+\.Index\s+(\d+))\s*\}\}")

    def __init__(self, path: Path) -> None:
        doc = yaml.safe_load(path.read_text())
        self.info = registry.by_api_version_kind(doc["apiVersion"], doc["kind"])
        metadata = doc.get("metadata", {})
        self.namespace = metadata.get("namespace", "")
        self.generated = "generateName" in metadata and "name" not in metadata
        self._json = msgspec.json.encode(doc).decode()
        self._static = self._PLACEHOLDER.search(self._json) is None

    def render(self, index: int) -> bytes:
        if self._static:
            return self._json.encode()

        def value(m: re.Match[str]) -> str:
            return str(index % int(m.group(1)) if m.group(1) else index)

        return self._PLACEHOLDER.sub(value, self._json).encode()


def resource_slice(driver: str, node: str, devices: int) -> dict[str, Any]:
    """The slice upstream's test driver publishes for a node (`resourceSlice` in
    scheduler_perf's dra.go), in resource.k8s.io/v1 form."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": node},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"instance-{i}",
                    "attributes": {
                        "model": {"string": "A100"},
                        "family": {"string": "GPU"},
                        "driverVersion": {"version": "1.2.3"},
                        "dra.example.com/numa": {"int": i},
                    },
                    "capacity": {"memory": {"value": "1Gi"}},
                }
                for i in range(devices)
            ],
        },
    }
