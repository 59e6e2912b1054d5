"""Where `reference/build` puts upstream's binaries: the same path, computed in Python.

The cache lives outside the repository, one directory per version of the Go module
(`<kubernetes version>-<12 hex digits of sha256(go.mod + go.sum)>/bin`), so every
worktree on a machine shares one build, and a change of version builds anew beside it.
"""

from __future__ import annotations

import datetime
import hashlib
import os
from pathlib import Path

__all__ = [
    "BINARIES",
    "HERE",
    "bin_dir",
    "built_bin_dir",
    "cache_root",
    "kubernetes_version",
    "missing_reason",
    "run_context",
]

HERE = Path(__file__).resolve().parent
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kubectl",
    "kwok",
)


def cache_root() -> Path:
    """$DRASIM_REFERENCE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/drasim-reference."""
    given = os.environ.get("DRASIM_REFERENCE_CACHE")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "drasim-reference"


def kubernetes_version(go_mod: Path | None = None) -> str:
    """The k8s.io/kubernetes version go.mod requires."""
    for line in (go_mod or HERE / "go.mod").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "k8s.io/kubernetes":
            return fields[1]
    raise ValueError("reference/go.mod requires no k8s.io/kubernetes")


def bin_dir() -> Path:
    """Where the binaries of this go.mod and go.sum are, or would be, as `build` says."""
    digest = hashlib.sha256((HERE / "go.mod").read_bytes() + (HERE / "go.sum").read_bytes())
    return cache_root() / f"{kubernetes_version()}-{digest.hexdigest()[:12]}" / "bin"


def built_bin_dir() -> Path | None:
    """`bin_dir()` if a build there completed, else None."""
    found = bin_dir()
    complete = all(
        (found / name).is_file()
        for name in (".complete", "kwok-stages.yaml", "kwok-stages-fast.yaml")
    )
    return found if complete else None


def missing_reason() -> str:
    """Why the reference cannot run, for a skip message; empty when it can."""
    if built_bin_dir() is not None:
        return ""
    return (
        f"upstream's binaries are not built ({bin_dir()} is missing): "
        "run reference/build (needs Go and the Go module proxy)"
    )


def run_context() -> dict[str, object]:
    """What a benchmark's results need beside its figures: when, on how many CPUs at what
    load (this machine's cores are shared), and the versions `build` recorded."""
    built = built_bin_dir()
    versions = {}
    if built is not None:
        for line in (built / ".complete").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name != "seconds":
                versions[name] = value
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "reference": versions,
    }
