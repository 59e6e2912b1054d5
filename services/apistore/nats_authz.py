"""What an identity may do over the NATS API: RBAC for the scheduler and the controllers.

A NATS request's actor is the identity NATS vouches for (`drasim.common.nats_auth`), and
the apistore holds it to what kube-apiserver holds that identity to:

- the scheduler (`system:kube-scheduler`), the controller manager's informers
  (`system:kube-controller-manager`) and its controllers (their service accounts,
  `system:serviceaccount:kube-system:<controller>`) by RBAC, with the groups upstream's
  authenticators give them, against the roles the apistore serves (upstream's bootstrap
  roles among them, `drasim.apistore.bootstrappolicy`). Their writes are then also RBAC's to judge
  for escalation (`drasim.apistore.rbac_escalation`), as upstream's;
- a kubelet (`system:node:<name>`) by the Node authorizer (`ApiCore.handle`) and
  NodeRestriction (the writes), as before;
- any other actor may be published only by an admin connection (the apistore, `drasim
  up`, the CLI, the tests), which may act as anyone: it stays unrestricted, as a member
  of system:masters is.

A request is authorized here once, as it arrives and before it is read or queued for the
writer: reads and writes alike. Its attributes are those of the HTTP request that would do
the same (`drasim.apistore.http.authn.attributes`), so a role means the same on both
front doors, and a refusal is upstream's 403.
"""

from __future__ import annotations

import msgspec

from drasim.apistore import rbac, request
from drasim.common import nats_auth
from drasim.common.bus import messages

__all__ = ["attributes", "authorize"]


def authorize(policy: rbac.Policy, actor: str, req: messages.Request) -> tuple[str, ...] | None:
    """The groups of `actor` when RBAC governs it (for the request's `Context`), None when
    it does not; raises the authorizer's 403 when RBAC does not allow `req`."""
    groups = nats_auth.rbac_groups(actor)
    if groups is None:
        return None
    if isinstance(req, messages.EventLog):
        raise rbac.event_log_refusal(actor)
    attrs = attributes(req)
    if not policy.authorize(actor, groups, attrs).allowed:
        raise rbac.refusal(attrs, actor)
    return groups


def attributes(req: messages.Request) -> rbac.Attributes:
    """What a request does, as `rbac.Attributes`: Get, List, Create, Update, Patch and
    Delete are their verbs (with the request's subresource), Bind creates `pods/binding`.
    A namespaced object's namespace is the one the write goes to (`default` when the
    request names none), a cluster-scoped one's none; a List without a namespace lists
    at the cluster scope."""
    info = request.resource_info(req.resource)
    namespace = req.namespace if info.namespaced else ""
    subresource, name = "", ""
    match req:
        case messages.Get():
            verb, name = "get", req.name
        case messages.List():
            verb = "list"
        case messages.Create():
            verb = "create"
            if info.namespaced and not namespace:  # as `request.request_namespace`
                namespace = _namespace_of(req.object)
        case messages.Update():
            verb, name, subresource = "update", req.name, req.subresource
        case messages.Patch():
            verb, name, subresource = "patch", req.name, req.subresource
        case messages.Delete():
            verb, name = "delete", req.name
        case messages.Bind():
            verb, name, subresource = "create", req.name, "binding"
        case _:
            raise TypeError(f"no attributes for {type(req).__name__}")
    if info.namespaced and not namespace and not isinstance(req, messages.List):
        namespace = "default"
    return rbac.Attributes(
        verb,
        namespace=namespace,
        group=info.group,
        resource=info.plural,
        subresource=subresource,
        name=name,
    )


class _Metadata(msgspec.Struct):
    namespace: str = ""


class _Object(msgspec.Struct):
    metadata: _Metadata = msgspec.field(default_factory=_Metadata)


_decode_object = msgspec.json.Decoder(_Object).decode


def _namespace_of(body: msgspec.Raw) -> str:
    """The namespace a create's object names, "" when it names none or cannot be read
    (then the write itself fails, with the full decode's 400 or 422)."""
    try:
        return _decode_object(body).metadata.namespace
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ""
