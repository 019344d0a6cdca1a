"""Where kubesim's components would record Events, as a real cluster's components do.

A hook, not the Events kind: `EventRecorder.record` is called where the real component
records an Event (the kubelet's `Killing` when a pod's grace period starts, the node
controller's `NodeNotReady`, the kubelet's `NodeNotSchedulable`), and does nothing here. The
module that serves core/v1 Events replaces `Cluster.recorder` with one that stores them.
"""

from __future__ import annotations

from typing import Any

NORMAL = "Normal"
WARNING = "Warning"


class EventRecorder:
    def record(
        self,
        involved: dict[str, Any],
        *,
        type_: str,
        reason: str,
        message: str,
        component: str,
    ) -> None:
        """`involved` is the object the Event is about (a pod or a node, as stored)."""
