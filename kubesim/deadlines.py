"""The kubelet's active deadline (`spec.activeDeadlineSeconds`): a pod still running that
long after it started is failed, its containers killed, with the pod-level reason and
message the kubelet writes. A Job's pod template carries it; so does a bare pod."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim.store import key_of
from kubesim.workload import CLASS_LABEL

if TYPE_CHECKING:
    from kubesim.cluster_view import ClusterView

REASON = "DeadlineExceeded"
MESSAGE = "Pod was active on the node longer than the specified deadline"
KILLED_EXIT_CODE = 137  # SIGKILL


def enforced(pod: dict[str, Any]) -> int | None:
    """The pod's deadline in seconds, or None when there is none to enforce here. The
    workload model's pods are left to it: it plays the kubelet for them, deciding when each
    ends (a pod that never starts fails at its deadline there), so its replayed history is
    the one its record tells."""
    if CLASS_LABEL in ((pod.get("metadata") or {}).get("labels") or {}):
        return None
    seconds = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    return seconds if isinstance(seconds, int) and seconds > 0 else None


def deadline_exceeded(status: dict[str, Any], now: str) -> dict[str, Any]:
    """`status` with the pod failed at its deadline: phase, reason and message on the pod,
    each running container terminated by the kill."""
    ended = copy.deepcopy(status)
    ended.update(phase="Failed", reason=REASON, message=MESSAGE)
    for condition in ended.get("conditions") or []:
        if condition.get("type") in ("Ready", "ContainersReady"):
            condition.update(status="False", lastTransitionTime=now, reason="PodFailed")
    for container in ended.get("containerStatuses") or []:
        started = (container.get("state") or {}).get("running", {}).get("startedAt", now)
        container.update(ready=False, started=False)
        container["state"] = {
            "terminated": {
                "exitCode": KILLED_EXIT_CODE,
                "reason": "Error",
                "startedAt": started,
                "finishedAt": now,
            }
        }
    return ended


class ActiveDeadlines:
    """On kubesim's own server: each pod that starts with a deadline gets a timer."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        cluster.start_hooks.insert(0, self._started)

    def _started(self, pod: dict[str, Any], running: dict[str, Any]) -> None:
        seconds = enforced(pod)
        if seconds is not None:
            meta = pod["metadata"]
            # A pod bound as it is created has no uid yet: its start time tells it apart
            # from a later pod of the same name.
            key, started = key_of(meta.get("namespace"), meta["name"]), running.get("startTime")
            when = self.cluster.store.clock.now() + seconds
            self.cluster.timers.at(when, lambda: self._expire(key, started))
        return None  # the pod starts as it would have

    def _expire(self, key: str, started: str | None) -> None:
        found = self.cluster.store.objects["pods"].get(key)
        if found is None:
            return
        status = found.obj.get("status") or {}
        if status.get("startTime") != started:
            return
        if status.get("phase") != "Running" or found.obj["metadata"].get("deletionTimestamp"):
            return
        pod = copy.deepcopy(found.obj)
        pod["status"] = deadline_exceeded(status, self.cluster.store.clock.rfc3339())
        self.cluster.store.replace("pods", pod, expected_rv=None)
