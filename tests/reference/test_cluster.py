"""reference.cluster's process handling, with stand-ins for upstream's binaries (no Go)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

ROOT = Path(__file__).parents[2]

# A parent that starts a stand-in "etcd" as `reference/up` starts the real one (which says
# "started etcd (pid N, log ...)") and waits to be killed.
PARENT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from drasim.common import cluster_file
    from reference.cluster import ReferenceCluster

    run_dir, bin_dir = Path(sys.argv[1]), Path(sys.argv[2])
    (run_dir / "logs").mkdir(parents=True)
    say = lambda message: print(message, flush=True)
    ReferenceCluster(run_dir, cluster_file.load(None), bin_dir, say=say)._spawn("etcd", [])
    time.sleep(600)
    """
)


def test_a_killed_parent_takes_upstreams_processes_along(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    etcd = bin_dir / "etcd"
    # Deaf to SIGTERM, as kube-apiserver's clean stop is once its etcd is gone.
    etcd.write_text("#!/bin/sh\ntrap '' TERM\nexec sleep 600\n")
    etcd.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path / "run"), str(bin_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    child: psutil.Process | None = None
    try:
        assert parent.stdout is not None
        started = re.match(r"started etcd \(pid (\d+),", parent.stdout.readline())
        assert started, "the parent did not start the stand-in"
        child = psutil.Process(int(started.group(1)))
        assert child.is_running()
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        gone, alive = psutil.wait_procs([child], timeout=10)
        assert gone == [child] and not alive, "the stand-in etcd outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child is not None:
            with contextlib.suppress(psutil.Error):
                child.kill()
