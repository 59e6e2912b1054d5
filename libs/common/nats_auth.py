"""Who may do what on the embedded NATS: one user per identity, with subject permissions.

Without them any local process could read every event, answer API requests by joining
the apistore's queue group, publish into the event stream, or pose as any actor. So:

- only the apistore (and admins) may publish events, serve the API subjects and install
  fault plans; everything else is refused by the server itself;
- a request's actor is the token after `<prefix>.api.` in its subject
  (`subjects.api`), and a user may publish requests only as the actors listed for it
  (a kubelet process as `system:node:<name>` of each node it hosts, the scheduler as
  `system:kube-scheduler`, the controller manager as `system:kube-controller-manager` and
  its controllers' service accounts); an admin may act as anyone, as Kubernetes'
  impersonation lets system:masters. The apistore holds each identity to what upstream
  holds it to: nodes by the Node authorizer and NodeRestriction, the scheduler and the
  controllers by RBAC with upstream's bootstrap roles (`drasim.apistore.nats_authz`);
- a user's inboxes are `_INBOX_<user>.…` and only it may subscribe to them, so nobody
  reads another's replies; a kubelet subscribes only to its own nodes' control and DRA
  driver subjects, and watches only its own nodes' pod events; the scheduler and the
  controller manager watch only the kinds their bootstrap roles let them watch (consumers
  of other subjects are refused by JetStream's API permissions,
  `drasim.common.bus.consumer`).

Each user's password is generated once into `<data-dir>/nats-auth/<user>` (mode 0600,
`user:password`, what `Bus.connect(credentials=...)` reads), so services keep their
credentials across restarts of NATS. A NATS cluster of one's own takes the same
permissions (README, "Using your own NATS and Postgres").
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drasim.common.bus import consumer, subjects
from drasim.common.bus.client import inbox_prefix

# What a JetStream client needs to watch any part of the event stream: stream info for its
# bounds, consumers of any filter (`drasim.common.bus.consumer`) and their flow control.
_JETSTREAM_READER = (
    "$JS.API.INFO",
    "$JS.API.STREAM.INFO.*",
    "$JS.API.CONSUMER.CREATE.>",
    "$JS.API.CONSUMER.INFO.>",
    "$JS.API.CONSUMER.DELETE.>",
    "$JS.FC.>",
    "$JS.ACK.>",
)
AUTH_DIR = "nats-auth"
# The user a kubelet acts as for a node (`drasim.apistore.node_restriction`).
NODE_USER_PREFIX = "system:node:"
# Whom the scheduler and the controller manager act as, named as upstream's
# (`user.KubeScheduler`, `user.KubeControllerManager`): the controller manager's shared
# informers list as it; each controller writes as its own service account in kube-system,
# as kube-controller-manager does with `--use-service-account-credentials`.
KUBE_SCHEDULER = "system:kube-scheduler"
KUBE_CONTROLLER_MANAGER = "system:kube-controller-manager"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
CONTROLLERS_NAMESPACE = "kube-system"
DEPLOYMENT_CONTROLLER = "deployment-controller"
REPLICASET_CONTROLLER = "replicaset-controller"
RESOURCE_CLAIM_CONTROLLER = "resource-claim-controller"
DISRUPTION_CONTROLLER = "disruption-controller"
CLUSTERROLE_AGGREGATION_CONTROLLER = "clusterrole-aggregation-controller"
RESOURCEQUOTA_CONTROLLER = "resourcequota-controller"
DEVICE_TAINT_EVICTION_CONTROLLER = "device-taint-eviction-controller"
JOB_CONTROLLER = "job-controller"
CRONJOB_CONTROLLER = "cronjob-controller"
DAEMON_SET_CONTROLLER = "daemon-set-controller"
STATEFULSET_CONTROLLER = "statefulset-controller"
TTL_AFTER_FINISHED_CONTROLLER = "ttl-after-finished-controller"
SERVICE_ACCOUNT_CONTROLLER = "service-account-controller"
ROOT_CA_CERT_PUBLISHER = "root-ca-cert-publisher"
CONTROLLERS = (
    DEPLOYMENT_CONTROLLER,
    REPLICASET_CONTROLLER,
    RESOURCE_CLAIM_CONTROLLER,
    DISRUPTION_CONTROLLER,
    CLUSTERROLE_AGGREGATION_CONTROLLER,
    RESOURCEQUOTA_CONTROLLER,
    DEVICE_TAINT_EVICTION_CONTROLLER,
    JOB_CONTROLLER,
    CRONJOB_CONTROLLER,
    DAEMON_SET_CONTROLLER,
    STATEFULSET_CONTROLLER,
    TTL_AFTER_FINISHED_CONTROLLER,
    SERVICE_ACCOUNT_CONTROLLER,
    ROOT_CA_CERT_PUBLISHER,
)
# The emulated DRA drivers' controller (attachment, device status), hosted by the
# controller manager's process but acting as the drivers' own service account, which the
# drivers' manifests bind (`drasim.controllers.dradriver.rbac`), not a bootstrap role.
DRA_DRIVER = "dra-driver"
# Upstream's groups: every authenticated user's, and a service account's own.
AUTHENTICATED_GROUP = "system:authenticated"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"


def node_identity(node: str) -> str:
    """Whom a kubelet acts as for `node` (Kubernetes' node user name)."""
    return NODE_USER_PREFIX + node


def service_account(namespace: str, name: str) -> str:
    """A service account's user name (upstream `serviceaccount.MakeUsername`)."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def controller_identity(controller: str) -> str:
    """Whom a controller of the controller manager acts as: its service account."""
    return service_account(CONTROLLERS_NAMESPACE, controller)


def rbac_groups(actor: str) -> tuple[str, ...] | None:
    """The groups of an identity RBAC governs on the bus, as upstream's authenticators
    give them: the scheduler and the controller manager are `system:authenticated`, a
    service account also `system:serviceaccounts` and `system:serviceaccounts:<ns>`.
    None for any other actor: a node (held by the Node authorizer and NodeRestriction
    instead), and the names only an admin connection may publish as (`drasim up`, the
    CLI, tests), which stay unrestricted, as members of system:masters are."""
    if actor in (KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER):
        return (AUTHENTICATED_GROUP,)
    if actor.startswith(SERVICE_ACCOUNT_PREFIX):
        namespace, sep, name = actor.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
        if namespace and sep and name and ":" not in name:
            return (
                SERVICE_ACCOUNTS_GROUP,
                f"{SERVICE_ACCOUNTS_GROUP}:{namespace}",
                AUTHENTICATED_GROUP,
            )
    return None


@dataclass(frozen=True)
class NatsUser:
    """One identity on the bus. `admin`: every subject (the apistore, people's CLI)."""

    name: str
    admin: bool = False
    actors: tuple[str, ...] = ()  # whom its API requests may act as
    publish: tuple[str, ...] = ()  # further subjects it may publish to
    subscribe: tuple[str, ...] = ()  # further subjects it may subscribe to
    # The event subjects (filters) it may watch; None: the whole stream.
    watches: tuple[str, ...] | None = None

    def permissions(self, prefix: str) -> dict[str, Any] | None:
        """nats-server's `permissions` block; None (everything) for an admin."""
        if self.admin:
            return None
        return {
            "publish": {
                "allow": [
                    *(subjects.api(prefix, actor) for actor in self.actors),
                    *self._jetstream(prefix),
                    *self.publish,
                ]
            },
            # What it watches it may also follow by plain subscription (`drasim.common.follow`).
            "subscribe": {
                "allow": [f"{inbox_prefix(self.name)}.>", *self.subscribe, *(self.watches or ())]
            },
            # Answering a request (a kubelet's control or driver subject) needs its reply
            # subject, which is another user's inbox: allowed for the request's reply only.
            "allow_responses": True,
        }

    def _jetstream(self, prefix: str) -> tuple[str, ...]:
        """What it may ask of JetStream: with `watches`, consumers of those filters only
        (made on the filtered API subject, which the server holds to the filter), with
        their flow control; nothing else, not even stream info."""
        if self.watches is None:
            return _JETSTREAM_READER
        return (
            *(consumer.create_subject(prefix, f) for f in self.watches),
            f"$JS.FC.{'*' if prefix == '*' else subjects.stream(prefix)}.>",
        )


def cluster_users(prefix: str, kubelet_shards: Sequence[Iterable[str]] = ()) -> list[NatsUser]:
    """The identities of a `drasim up` cluster: `kubelet_shards` lists each kubelet
    process' nodes. The control and driver subjects are those of
    `drasim.kubelet.control` and `drasim.drivers.dra_api`."""
    users = [
        NatsUser("admin", admin=True),
        NatsUser("apistore", admin=True),
        _governed("scheduler", prefix, (KUBE_SCHEDULER,)),
        _governed(
            "controllers",
            prefix,
            (
                KUBE_CONTROLLER_MANAGER,
                *(controller_identity(c) for c in (*CONTROLLERS, DRA_DRIVER)),
            ),
        ),
    ]
    for i, shard in enumerate(kubelet_shards):
        nodes = list(shard)
        tokens = [subjects.token(node) for node in nodes]
        driver_subjects = tuple(f"{prefix}.dra.{node}.*" for node in tokens)
        control_subjects = tuple(f"{prefix}.ctl.kubelet.{node}" for node in tokens)
        heads = tuple(subjects.heads_of(prefix, "pods", node) for node in nodes)
        users.append(
            NatsUser(
                f"kubelet-{i}",
                # As each node it hosts, which NodeRestriction then holds to its own.
                actors=tuple(node_identity(node) for node in nodes),
                publish=driver_subjects,
                subscribe=driver_subjects + control_subjects + heads,
                watches=tuple(subjects.events_of(prefix, "pods", node=node) for node in nodes),
            )
        )
    return users


def _governed(name: str, prefix: str, actors: tuple[str, ...]) -> NatsUser:
    """A user whose actors RBAC governs: it may watch the kinds their bootstrap roles let
    them watch, and no others. The roles are the one source of both: the apistore
    authorizes its requests by them, and its consumers are bounded by what they allow."""
    from drasim.apistore import bootstrappolicy  # (not a dependency of the rest)

    resources: dict[str, None] = {}
    for actor in actors:
        resources.update(
            dict.fromkeys(bootstrappolicy.bootstrap_watchable(actor, rbac_groups(actor) or ()))
        )
    watches = tuple(subjects.events_of(prefix, resource) for resource in resources)
    return NatsUser(name, actors=actors, watches=watches)


def credentials_path(data_dir: Path, user: str) -> Path:
    return data_dir / AUTH_DIR / user


def ensure_password(data_dir: Path, user: str) -> str:
    """The user's password from its credentials file, made (mode 0600) if missing."""
    path = credentials_path(data_dir, user)
    try:
        name, _, password = path.read_text().strip().partition(":")
        if name == user and password:
            return password
    except OSError:
        pass
    path.parent.mkdir(mode=0o700, exist_ok=True)
    password = secrets.token_hex(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(f"{user}:{password}\n")
    return password


def authorization(data_dir: Path, users: Sequence[NatsUser], prefix: str) -> dict[str, Any]:
    """nats-server's `authorization` block for `users`, passwords from the data directory."""
    entries = []
    for user in users:
        password = ensure_password(data_dir, user.name)
        entry: dict[str, Any] = {"user": user.name, "password": password}
        permissions = user.permissions(prefix)
        if permissions is not None:
            entry["permissions"] = permissions
        entries.append(entry)
    return {"users": entries}
