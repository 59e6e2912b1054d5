"""`python -m drasim.kubelet --cluster FILE --shard i/n`: one kubelet process.

It hosts every n-th node of the cluster file starting at node i (`drasim up --kubelets n`
starts n of them), prints `READY` once all its nodes are registered and their pods listed,
and runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from drasim.common import cluster_file, nats_auth, service
from drasim.common.client import ApiClient
from drasim.kubelet import backoff
from drasim.kubelet.run import KubeletProcess


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cluster", type=Path, help="cluster file (default: the KEP-5004 example cluster)"
    )
    parser.add_argument("--shard", default="0/1", help="i/n: host every n-th node from node i")
    parser.add_argument(
        "--state-dir", type=Path, help="where nodes keep their checkpoints (default: memory)"
    )
    parser.add_argument(
        "--heartbeat-seconds", type=float, default=10.0, help="Lease renewal period"
    )
    parser.add_argument(
        "--crash-loop-backoff",
        metavar="INITIAL/MAX",
        help="CrashLoopBackOff's first and longest delay in Go durations "
        "(default 10s/5m0s, upstream's; 1s/1m0s with ReduceDefaultCrashLoopBackOffDecay)",
    )


def main(argv: list[str] | None = None) -> int:
    config, args = service.parse_args("kubelet", argv, add=_add_arguments)
    try:
        cluster = cluster_file.load(args.cluster)
        index, count = cluster_file.parse_shard(args.shard)
        crash_loop_backoff = (
            backoff.parse(args.crash_loop_backoff) if args.crash_loop_backoff else None
        )
    except ValueError as exc:  # ClusterFileError is one
        print(f"drasim-kubelet: {exc}", file=sys.stderr)
        return 2
    nodes = cluster.shard(index, count)
    return service.run_on_bus(
        "kubelet",
        config,
        args,
        lambda bus: KubeletProcess(
            # The process' own reads (its nodes' pods) go as its first node: the bus lets
            # it act as its nodes alone.
            api=ApiClient(
                bus, actor=nats_auth.node_identity(nodes[0].name) if nodes else "kubelet"
            ),
            nodes=nodes,
            state_dir=args.state_dir,
            heartbeat_period=args.heartbeat_seconds,
            features=args.feature_gates,
            pod_defaults=cluster.spec.pod_defaults,
            crash_loop_backoff=crash_loop_backoff,
        ),
        f"kubelet shard={index}/{count} nodes={len(nodes)}",
        connection=f"kubelet-{index}",
    )


if __name__ == "__main__":
    sys.exit(main())
