"""`reference/up`: upstream's control plane with a drasim cluster file's nodes, in the
foreground until Ctrl-C or SIGTERM (see `reference.cluster`).

    reference/up [--cluster FILE] [--run-dir DIR]
    export KUBECONFIG=$PWD/.drasim-reference/kubeconfig
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from drasim.common import cluster_file
from reference import paths
from reference.cluster import ReferenceCluster, ReferenceError

__all__ = ["main"]

DEFAULT_RUN_DIR = Path(".drasim-reference")


def say(message: str) -> None:
    print(f"reference: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run until a signal; 0 after a clean stop, 1 if a part failed, 2 if not built."""
    parser = argparse.ArgumentParser(prog="reference/up", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cluster", type=Path, help="drasim cluster file (default: the KEP-5004 example)"
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=DEFAULT_RUN_DIR,
        help=f"certificates, kubeconfig, etcd data and logs (default: {DEFAULT_RUN_DIR})",
    )
    args = parser.parse_args(argv)
    bin_dir = paths.built_bin_dir()
    if bin_dir is None:
        say(paths.missing_reason())
        return 2
    try:
        cluster = cluster_file.load(args.cluster)
    except cluster_file.ClusterFileError as exc:
        say(str(exc))
        return 1
    stopping = ready = False

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if not ready:  # cut the start short: the finally below stops what runs
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ref = ReferenceCluster(args.run_dir, cluster, bin_dir, say=say)
    started = time.monotonic()
    try:
        ref.start()
        ready = True
        say(f"kubeconfig: {ref.kubeconfig}")
        print(
            f"ready: Kubernetes {paths.kubernetes_version()} at https://127.0.0.1:{ref.api_port} "
            f"with {len(cluster.nodes)} nodes in {time.monotonic() - started:.0f} s; "
            f"export KUBECONFIG={ref.kubeconfig}",
            flush=True,
        )
        while not stopping:
            ref.check_alive()
            ref.ensure_slices()
            for _ in range(20):
                if stopping:
                    break
                time.sleep(0.1)
        say("stopping")
        return 0
    except KeyboardInterrupt:
        return 0
    except ReferenceError as exc:
        say(str(exc))
        return 1
    finally:
        ref.stop()
        say("stopped")


if __name__ == "__main__":
    sys.exit(main())
