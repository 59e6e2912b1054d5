"""Every NATS subject and JetStream name drasim uses, as functions of the cluster prefix.

Event subjects carry the node a namespaced object belongs to, so a kubelet process that hosts
N nodes subscribes to exactly those N nodes' events and not to the whole cluster's:

    <prefix>.ev.<resource>.<node>.<namespace>.<name>

Tokens are escaped (NATS splits subjects on '.'), and an empty token is written `_`.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[.*> \t\r\n%]")


def token(value: str) -> str:
    """One subject token: '.', wildcards and whitespace escaped as %XX; '' becomes '_'."""
    if not value:
        return "_"
    return _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", value)


_ESCAPED = re.compile(r"%([0-9A-F]{2})")


def untoken(value: str) -> str:
    """The value `token` escaped."""
    if value == "_":
        return ""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), value)


def api(prefix: str, actor: str) -> str:
    """Request/reply subject of the apistore for requests made as `actor`.

    The apistore takes a request's actor from its subject, never from a header: NATS'
    subject permissions decide which actors a connection may publish as (its own; an admin
    any, as Kubernetes' impersonation lets system:masters), so the actor is the
    authenticated identity (see `drasim.common.nats_auth.NatsUser`)."""
    return f"{prefix}.api.{token(actor)}"


def api_all(prefix: str) -> str:
    """What the apistore serves: the requests of every actor (in a queue group)."""
    return f"{prefix}.api.*"


def actor_of_api(subject: str) -> str:
    """The actor of a request published on `api(prefix, actor)`."""
    return untoken(subject.rsplit(".", 1)[-1])


def api_queue_group() -> str:
    return "apistore"


def event(
    prefix: str, resource: str, *, node: str = "", namespace: str = "", name: str = ""
) -> str:
    """Subject an event of one object is published on."""
    return f"{prefix}.ev.{resource}.{token(node)}.{token(namespace)}.{token(name)}"


def events_of(prefix: str, resource: str | None = None, *, node: str | None = None) -> str:
    """Filter subject for a watcher: all events, one resource's, or one resource on one node."""
    if resource is None:
        return f"{prefix}.ev.>"
    if node is None:
        return f"{prefix}.ev.{resource}.>"
    return f"{prefix}.ev.{resource}.{token(node)}.>"


def heads_of(prefix: str, resource: str, node: str) -> str:
    """Where the apistore announces, now and then, the last event of `resource` on `node`
    the stream holds (`drasim.apistore.outbox`): a follower that lost that event with none
    after it learns of the loss there (`drasim.common.follow`)."""
    return f"{prefix}.heads.{resource}.{token(node)}"


def stream(prefix: str) -> str:
    """Name of the JetStream stream holding the published event log."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", prefix).upper() + "_EVENTS"


def control(prefix: str, service: str, verb: str) -> str:
    """Control-plane side channel of a service (e.g. a kubelet's `fault` command)."""
    return f"{prefix}.ctl.{service}.{verb}"
