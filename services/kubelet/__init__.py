"""Kubelet emulators: one process hosts many nodes as asyncio tasks (`run.KubeletProcess`).

Each node probes its hardware, registers its Node and Lease, admits, prepares and runs the
pods bound to it and hands each container exactly its devices (`node`, `runtime`).
"""
