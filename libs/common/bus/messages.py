"""Wire types of the apistore's NATS API and of the event stream.

Requests are one tagged union decoded once; objects travel as raw JSON (`msgspec.Raw`) so the
apistore decodes each into its kind's type and the client into the type it expects.
"""

from __future__ import annotations

from typing import Literal

import msgspec


class _Request(msgspec.Struct, kw_only=True, omit_defaults=True, tag_field="verb"):
    resource: str
    namespace: str = ""


class Create(_Request, tag="create"):
    object: msgspec.Raw
    dry_run: bool = False
    # The version the object is written in when not the stored one (`resource.k8s.io`'s
    # betas over HTTP): the apistore converts it (`drasim.common.api.conversion`).
    version: str = ""


class Get(_Request, tag="get"):
    name: str


class List(_Request, tag="list"):
    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""
    # `metav1.ListOptions`' resourceVersion and resourceVersionMatch, as the request gave
    # them ("": the most recent; see `drasim.apistore.list_options`).
    resource_version: str = ""
    resource_version_match: str = ""
    # `sendInitialEvents` as the request gave it (None: not given); a list refuses it.
    send_initial_events: bool | None = None


class Update(_Request, tag="update"):
    name: str
    object: msgspec.Raw
    subresource: str = ""  # "" or "status"
    dry_run: bool = False
    version: str = ""  # as Create's


PatchType = Literal["merge", "json", "strategic", "apply"]


class Patch(_Request, tag="patch"):
    name: str
    patch: msgspec.Raw
    patch_type: PatchType = "merge"
    subresource: str = ""
    dry_run: bool = False
    field_manager: str = ""
    force: bool = False
    version: str = ""  # the patch applies to the object in this version (as Create's)


class Delete(_Request, tag="delete"):
    name: str
    grace_period_seconds: int | None = None
    propagation_policy: str = ""  # Background (default), Foreground, Orphan
    precondition_uid: str = ""
    precondition_resource_version: str = ""
    dry_run: bool = False


class Bind(_Request, tag="bind"):
    """pods/binding: assign a pod to a node (what the scheduler's Bind does)."""

    name: str
    node_name: str
    uid: str = ""


class EventLog(_Request, tag="eventlog"):
    """Read the event log itself (for `drasim events` and replay), oldest first."""

    resource: str = ""
    name: str = ""
    after: int = 0
    until: int = 0
    actor: str = ""
    trace_id: str = ""
    limit: int = 1000


Request = Create | Get | List | Update | Patch | Delete | Bind | EventLog

request_decoder = msgspec.json.Decoder(Request)
encoder = msgspec.json.Encoder()


class ListResult(msgspec.Struct, kw_only=True):
    """A list answer: items as raw JSON, and the resourceVersion the list is consistent at."""

    resource_version: int
    items: list[msgspec.Raw]
    continue_token: str = ""
    remaining: int = 0


class LoggedEvent(msgspec.Struct, kw_only=True):
    """One row of the event log as `drasim events` shows it."""

    seq: int
    type: str
    resource: str
    namespace: str
    name: str
    uid: str
    actor: str
    traceparent: str
    time: str
    object: msgspec.Raw


class EventLogResult(msgspec.Struct, kw_only=True):
    """A page of the event log. `last_seq`: the log's last event as the page was read.
    `continue_after`: when the page ended before the (filtered) log did, on its limit or
    on the bus's payload limit, the `after` of the next page; 0 on the last page.
    `compacted`: the log is compacted up to this seq (0: never), so it folds to the state at
    no earlier one; `compacted_at`: the latest write time among the compacted events."""

    events: list[LoggedEvent]
    last_seq: int
    continue_after: int = 0
    compacted: int = 0
    compacted_at: str = ""


class WatchEvent(msgspec.Struct, kw_only=True):
    """One event on the stream: Kubernetes' watch event JSON (`type`, `object`)."""

    type: str  # ADDED | MODIFIED | DELETED
    object: msgspec.Raw


watch_event_decoder = msgspec.json.Decoder(WatchEvent)
list_result_decoder = msgspec.json.Decoder(ListResult)
event_log_decoder = msgspec.json.Decoder(EventLogResult)
