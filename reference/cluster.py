"""Upstream's control plane on this machine, shaped like a drasim cluster.

`ReferenceCluster` runs etcd, kube-apiserver, kube-scheduler, kube-controller-manager and
kwok from `reference/build`'s cache, each as a child process in its own session with its
log under `<run-dir>/logs/`, and then writes what drasim's processes would: the cluster
file's DeviceClasses, one Node per node (kwok keeps them Ready and plays their pods), and
the ResourceSlices drasim's DRA driver shims publish (`reference.nodes`).

- Every start is a fresh cluster: etcd's data directory is made anew.
- The API serves HTTPS on the loopback interface with a certificate from drasim's own CA
  code; `<run-dir>/kubeconfig` holds a static token of `kubernetes-admin` in
  `system:masters` (as drasim's). The scheduler and the controller manager run as upstream's
  identities (`system:kube-scheduler`, `system:kube-controller-manager`, the latter with
  `--use-service-account-credentials`), so RBAC bounds them as in a real cluster.
- Admission runs upstream's defaults less `ServiceAccount`: drasim serves no
  ServiceAccounts, and with the plugin each pod would gain a token volume drasim cannot
  give (and wait for its namespace's `default` account to be made).
- Stopping (or a process record left by a killed run, as `drasim up` keeps) ends every child:
  SIGTERM to its process group, SIGKILL after 10 s. A parent that dies without stopping
  (SIGKILL) takes its children along (`drasim.cli.launch.die_with_parent`): with SIGKILL,
  since nobody is left to stop them in order, and kube-apiserver's clean stop hangs once
  etcd is gone. The signal follows the thread that started the child, so children must be
  started from a thread that lives as long as the cluster (the main one).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import secrets
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from drasim.cli import kubeconfig, launch, supervisor
from drasim.common.cluster_file import Cluster, NodeConfig
from drasim.common.embedded import free_port
from reference import nodes
from reference.kube import KubeClient

__all__ = ["ADMIN_USER", "FAST_STAGES", "STAGES", "ReferenceCluster", "ReferenceError"]

ADMIN_USER = "kubernetes-admin"
STOP_TIMEOUT = 10.0
START_TIMEOUT = 300.0  # a first kube-apiserver start on two busy cores takes a minute or two
SERVICE_CIDR = "10.96.0.0/16"
REGISTER_CONCURRENCY = 4
STAGES, FAST_STAGES = "kwok-stages.yaml", "kwok-stages-fast.yaml"
_DIE_WITH_PARENT = functools.partial(launch.die_with_parent, signal.SIGKILL)


class ReferenceError(RuntimeError):
    """The reference cluster could not start or stopped; the message says which part."""


@dataclass
class _Child:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes]
    log: IO[bytes]


@dataclass
class ReferenceCluster:
    """Upstream's control plane from `bin_dir`, with the nodes of `cluster`.

    Use as a context manager, or `start()` then `stop()`; `say` reports progress.
    """

    run_dir: Path
    cluster: Cluster
    bin_dir: Path
    say: Callable[[str], None] = print
    # The scheduler's and the controller manager's client-side rate limit (requests/s and
    # burst); None keeps upstream's defaults (50 and 20 requests/s), as a real cluster has.
    client_qps: int | None = None
    # kwok's stages in `bin_dir` (`reference/build` writes both): pods through their life
    # with its delays, or at once as kwokctl's defaults (FAST_STAGES).
    kwok_stages: str = STAGES
    kubeconfig: Path = field(init=False)
    api_port: int = field(init=False, default=0)
    _children: list[_Child] = field(init=False, default_factory=list)
    _lock: IO[str] | None = field(init=False, default=None)
    _records: supervisor.ProcessRecords = field(init=False)
    _client: KubeClient | None = field(init=False, default=None)
    _node_uids: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.run_dir = self.run_dir.resolve()
        self.kubeconfig = self.run_dir / "kubeconfig"
        self._records = supervisor.ProcessRecords(self.run_dir)

    def __enter__(self) -> ReferenceCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = KubeClient.from_kubeconfig(self.kubeconfig)
        return self._client

    # -- start ---------------------------------------------------------------------------
    def start(self) -> None:
        """Bring up every part, register the nodes and slices; returns once all serve."""
        self.start_control_plane()
        self.register_nodes()

    def start_control_plane(self) -> None:
        """etcd, the API server, the scheduler, the controller manager and kwok, without
        nodes; returns once all serve."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = supervisor.lock_data_dir(self.run_dir)
        orphans = self._records.stop_orphans()
        if orphans:
            self.say(f"stopped {len(orphans)} processes an earlier run left behind")
        (self.run_dir / "logs").mkdir(exist_ok=True)
        etcd_dir = self.run_dir / "etcd"
        if etcd_dir.exists():
            subprocess.run(["rm", "-rf", str(etcd_dir)], check=True)
        creds = self._credentials()
        etcd_port, etcd_peer = free_port(), free_port()
        self.api_port = free_port()
        server = f"https://127.0.0.1:{self.api_port}"
        self._spawn(
            "etcd",
            [
                "--name=reference",
                f"--data-dir={etcd_dir}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=reference=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync",  # a throw-away cluster: speed over durability
                "--log-level=warn",
            ],
        )
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # No Service network: the `kubernetes` Service's endpoints would have to be
                # a non-loopback address, which this machine's cluster has no use for.
                "--endpoint-reconciler-type=none",
                f"--secure-port={self.api_port}",
                f"--cert-dir={self.run_dir / 'apiserver'}",
                f"--tls-cert-file={creds['serving_cert']}",
                f"--tls-private-key-file={creds['serving_key']}",
                f"--client-ca-file={creds['ca']}",
                f"--token-auth-file={creds['tokens']}",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={creds['sa_key']}",
                f"--service-account-signing-key-file={creds['sa_key']}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # The API versions the cluster file serves besides the stored ones, as
                # `drasim up` serves them (the KEP example: resource.k8s.io's betas).
                f"--runtime-config={self.cluster.runtime_config_flag()}",
                "--disable-admission-plugins=ServiceAccount",
                "--v=1",
            ],
        )
        self._write_kubeconfig(self.kubeconfig, server, creds["admin_token"], creds["ca"])
        self._wait("kube-apiserver to serve", self.client.ready)
        scheduler_config = self.run_dir / "kube-scheduler.kubeconfig"
        self._write_kubeconfig(scheduler_config, server, creds["scheduler_token"], creds["ca"])
        manager_config = self.run_dir / "kube-controller-manager.kubeconfig"
        self._write_kubeconfig(manager_config, server, creds["manager_token"], creds["ca"])
        scheduler_port, manager_port = free_port(), free_port()
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={scheduler_config}",
                f"--authentication-kubeconfig={scheduler_config}",
                f"--authorization-kubeconfig={scheduler_config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={scheduler_port}",
                "--leader-elect=false",
                *self._rate_limit(),
                "--v=1",
            ],
        )
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={manager_config}",
                f"--authentication-kubeconfig={manager_config}",
                f"--authorization-kubeconfig={manager_config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={manager_port}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={creds['sa_key']}",
                f"--root-ca-file={creds['ca']}",
                *self._rate_limit(),
                "--v=1",
            ],
        )
        self._spawn(
            "kwok",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--config={self.bin_dir / self.kwok_stages}",
                f"--manage-nodes-with-annotation-selector="
                f"{nodes.KWOK_NODE_ANNOTATION}={nodes.KWOK_NODE_VALUE}",
                f"--server-address=127.0.0.1:{free_port()}",
                "--node-lease-duration-seconds=40",
                "--cidr=10.0.0.1/16",
            ],
        )
        self._wait("kube-scheduler to serve", lambda: _healthy(scheduler_port))
        self._wait("kube-controller-manager to serve", lambda: _healthy(manager_port))

    def register_nodes(self) -> None:
        """The cluster file's DeviceClasses, Nodes and slices; returns once kwok heartbeats
        every node (holds its Lease), as a kubelet does once registered."""
        self._register()
        self._wait("kwok to take the nodes", self._leases_held)

    def _rate_limit(self) -> list[str]:
        if self.client_qps is None:
            return []
        return [f"--kube-api-qps={self.client_qps}", f"--kube-api-burst={self.client_qps}"]

    def _credentials(self) -> dict[str, Path | str]:
        """The cluster CA and serving certificate (drasim's code), a service-account key,
        and static tokens for the admin, the scheduler and the controller manager."""
        certs = kubeconfig.ensure_serving_certs(self.run_dir)
        sa_key = self.run_dir / "pki" / "service-account.key"
        if not sa_key.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            _write_private(
                sa_key,
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.TraditionalOpenSSL,
                    serialization.NoEncryption(),
                ),
            )
        tokens = {
            "admin_token": (ADMIN_USER, "system:masters"),
            "scheduler_token": ("system:kube-scheduler", ""),
            "manager_token": ("system:kube-controller-manager", ""),
        }
        found: dict[str, Path | str] = {
            "ca": certs.ca_cert,
            "serving_cert": certs.cert,
            "serving_key": certs.key,
            "sa_key": sa_key,
        }
        lines = []
        for kind, (user, groups) in tokens.items():
            token = secrets.token_urlsafe(32)
            found[kind] = token
            lines.append(
                f'{token},{user},{user},"{groups}"' if groups else f"{token},{user},{user}"
            )
        found["tokens"] = self.run_dir / "tokens.csv"
        _write_private(Path(found["tokens"]), ("\n".join(lines) + "\n").encode())
        return found

    def _write_kubeconfig(self, path: Path, server: str, token: str | Path, ca: Any) -> None:
        config = kubeconfig.build(server, str(token), Path(ca).read_bytes(), name="reference")
        _write_private(path, yaml.safe_dump(config, sort_keys=False).encode())

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.run_dir / "logs" / f"{name}.log").open("ab")
        argv = [str(self.bin_dir / name), *args]
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the parent only; it stops us in order
            preexec_fn=_DIE_WITH_PARENT if sys.platform == "linux" else None,
        )
        self._children.append(_Child(name, argv, process, log))
        self._records.add(name, process.pid)
        self.say(f"started {name} (pid {process.pid}, log {log.name})")

    def _wait(self, what: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            self.check_alive()
            with contextlib.suppress(OSError, RuntimeError):
                if check():
                    return
            if time.monotonic() > deadline:
                raise ReferenceError(f"timed out after {START_TIMEOUT:.0f} s waiting for {what}")
            time.sleep(0.5)

    def _register(self) -> None:
        """DeviceClasses first (as `drasim up`), then each Node and its slices, a few
        nodes at a time, as drasim's kubelets register theirs."""
        for obj in nodes.device_classes(self.cluster):
            self._create(obj)

        def register(config: NodeConfig) -> None:
            uid = self._create(nodes.node_object(config))["metadata"]["uid"]
            self._node_uids[config.name] = uid
            for obj in nodes.slice_objects(config, node_uid=uid):
                self._create(obj)

        with concurrent.futures.ThreadPoolExecutor(REGISTER_CONCURRENCY) as pool:
            list(pool.map(register, self.cluster.nodes))
        self.say(
            f"registered {len(self.cluster.nodes)} nodes and "
            f"{len(self.cluster.device_classes())} DeviceClasses"
        )

    def ensure_slices(self) -> None:
        """Create the slices drasim's drivers publish that are missing (all, at first)."""
        present = {
            s["metadata"]["name"] for s in self.client.list("resource.k8s.io/v1", "ResourceSlice")
        }
        for config in self.cluster.nodes:
            uid = self._node_uids.get(config.name)
            if uid is None:
                continue
            for obj in nodes.slice_objects(config, node_uid=uid):
                if obj["metadata"]["name"] not in present:
                    self._create(obj)

    def _create(self, obj: dict[str, Any]) -> dict[str, Any]:
        answer = self.client.create(obj)
        if not answer.ok:
            name = obj["metadata"]["name"]
            raise ReferenceError(f"creating {obj['kind']} {name}: {answer.status} {answer.body}")
        created: dict[str, Any] = answer.body
        return created

    def _leases_held(self) -> bool:
        leases = self.client.list("coordination.k8s.io/v1", "Lease", namespace="kube-node-lease")
        held = {lease["metadata"]["name"] for lease in leases}
        return all(config.name in held for config in self.cluster.nodes)

    # -- run and stop ----------------------------------------------------------------------
    def check_alive(self) -> None:
        """Raise if a child has exited: the cluster is no longer upstream's whole."""
        for child in self._children:
            code = child.process.poll()
            if code is not None:
                raise ReferenceError(
                    f"{child.name} exited with code {code}; its log: {child.log.name}\n"
                    + _tail(Path(child.log.name))
                )

    def stop(self) -> None:
        """Stop every child, newest first (kwok and the controllers before the API server,
        the API server before etcd), and release the run directory."""
        for child in reversed(self._children):
            if child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.process.pid, signal.SIGTERM)
                try:
                    child.process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(child.process.pid, signal.SIGKILL)
                    child.process.wait(timeout=STOP_TIMEOUT)
            # Anything a child started in its group goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.process.pid, signal.SIGKILL)
            self._records.discard(child.name)
            child.log.close()
        self._children.clear()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _healthy(port: int) -> bool:
    """A component's `/healthz` (always allowed unauthenticated) answers ok."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # its own self-signed serving certificate
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=5) as r:
        return bool(r.status == 200)


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb", opener=lambda p, flags: os.open(p, flags, 0o600)) as f:
        f.write(data)


def _tail(path: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def alive_descendants() -> list[int]:
    """Pids of this process's live descendants (for tests that nothing is left behind)."""
    return [
        p.pid
        for p in psutil.Process().children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE
    ]
