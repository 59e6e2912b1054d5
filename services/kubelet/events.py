"""Warning Events a kubelet records on pods (`FailedPrepareDynamicResources`, admission
rejections), so `drasim describe pod` shows why a pod does not start."""

from __future__ import annotations

import logging

from drasim.common import errors
from drasim.common import events as common_events
from drasim.common.api import core_v1
from drasim.common.client import ApiClient

__all__ = ["EventRecorder"]

log = logging.getLogger(__name__)


class EventRecorder:
    """One node's recorder. A retried failure repeats its message: the pod keeps one Event
    whose count grows, as `kubectl describe pod` shows it ("x5 over 3m")."""

    def __init__(self, api: ApiClient, node: str) -> None:
        self.node = node
        self.recorder = common_events.EventRecorder(
            api,
            component="kubelet",
            host=node,
            reporting_instance=node,
            spam_filter=common_events.SpamFilter(),
        )

    async def warn(self, pod: core_v1.Pod, reason: str, message: str) -> None:
        involved = core_v1.ObjectReference(
            kind="Pod",
            api_version="v1",
            namespace=pod.metadata.namespace,
            name=pod.metadata.name,
            uid=pod.metadata.uid,
        )
        try:
            await self.recorder.record(involved, "Warning", reason, message)
        except errors.ApiError as exc:
            log.warning("node %s: recording event %s failed: %s", self.node, reason, exc)

    def forget(self, pod_uid: str) -> None:
        """The pod is gone: its Events need no counting any more."""
        self.recorder.forget(pod_uid)
