"""drasim's controllers: Deployment → ReplicaSet → Pods, and ResourceClaims for pods.

`ControllerManager` runs them all in one process over shared informers.
"""

from drasim.controllers.server import ControllerManager

__all__ = ["ControllerManager"]
