"""How a driver call failed, so the caller knows whether to retry (kopf's error intents).

The kubelet retries a pod whose devices could not be prepared (`TemporaryError`, after
`delay` seconds), but rejects a pod outright when retrying cannot help (`PermanentError`).
"""

from __future__ import annotations

__all__ = ["PermanentError", "TemporaryError"]


class TemporaryError(Exception):
    """Retry later: the claim is not reserved yet, the driver is not answering, ..."""

    def __init__(self, message: str, *, delay: float = 1.0) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """Retrying cannot help: the request itself is wrong for this node."""
