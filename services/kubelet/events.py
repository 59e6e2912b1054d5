"""Warning Events a kubelet records on pods (`FailedPrepareDynamicResources`, admission
rejections), so `drasim describe pod` shows why a pod does not start."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from drasim.common import errors
from drasim.common.api import core_v1, meta_v1
from drasim.common.client import ApiClient

__all__ = ["EventRecorder"]

log = logging.getLogger(__name__)


class EventRecorder:
    """One node's recorder. A retried failure repeats its message; it is recorded once."""

    def __init__(self, api: ApiClient, node: str) -> None:
        self.api = api
        self.node = node
        self._last: dict[str, str] = {}  # pod UID → last message recorded

    async def warn(self, pod: core_v1.Pod, reason: str, message: str) -> None:
        if self._last.get(pod.metadata.uid) == message:
            return
        self._last[pod.metadata.uid] = message
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = core_v1.Event(
            # Named as upstream's recorder names events: involved object, then a unique hex.
            metadata=meta_v1.ObjectMeta(
                name=f"{pod.metadata.name}.{time.time_ns():x}", namespace=pod.metadata.namespace
            ),
            involved_object=core_v1.ObjectReference(
                kind="Pod",
                api_version="v1",
                namespace=pod.metadata.namespace,
                name=pod.metadata.name,
                uid=pod.metadata.uid,
            ),
            reason=reason,
            message=message,
            source=core_v1.EventSource(component="kubelet", host=self.node),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            type="Warning",
            reporting_component="kubelet",
            reporting_instance=self.node,
        )
        try:
            await self.api.create(event)
        except errors.ApiError as exc:
            log.warning("node %s: recording event %s failed: %s", self.node, reason, exc)

    def forget(self, pod_uid: str) -> None:
        self._last.pop(pod_uid, None)
