"""The node lifecycle controller's taints, as pkg/controller/nodelifecycle writes them.

- On every node change, the NoSchedule pass: `node.kubernetes.io/unschedulable` for a
  cordoned node, and one taint per unhealthy condition (Ready False: `not-ready`, Ready
  Unknown: `unreachable`, MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True).
- Every node-monitor period (5 s) after a node's Ready condition changes, the NoExecute
  pass: `not-ready:NoExecute` or `unreachable:NoExecute` while it is not Ready, removed once
  it is Ready again.
- A kubelet that stops posting status (`kubelet_stops`) leaves its node Ready=Unknown
  ("Kubelet stopped posting node status.") after the node-monitor grace period (50 s).

Each change is its own write (a new resourceVersion) with `timeAdded` on the taints it
adds, made after the write that caused it: a client that PATCHes with the resourceVersion
it read before meets a 409. Taints the controller does not own are never touched.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim.events import NORMAL
from kubesim.store import Entry

if TYPE_CHECKING:
    from kubesim.cluster_view import ClusterView

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
CONDITION_TAINTS = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
CONTROLLER_KEYS = set(CONDITION_TAINTS.values()) | {UNSCHEDULABLE}
UNKNOWN_WHEN_SILENT = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
NODE_MONITOR_PERIOD = 5.0
NODE_MONITOR_GRACE_PERIOD = 50.0


def _conditions(node: dict[str, Any]) -> dict[str, str]:
    return {
        str(c.get("type")): str(c.get("status"))
        for c in (node.get("status") or {}).get("conditions") or []
    }


def wanted_no_schedule(node: dict[str, Any]) -> set[str]:
    conditions = _conditions(node)
    keys = {key for (kind, state), key in CONDITION_TAINTS.items() if conditions.get(kind) == state}
    if (node.get("spec") or {}).get("unschedulable"):
        keys.add(UNSCHEDULABLE)
    return keys


def wanted_no_execute(node: dict[str, Any]) -> str | None:
    ready = _conditions(node).get("Ready")
    return {"False": NOT_READY, "Unknown": UNREACHABLE}.get(ready or "")


class NodeLifecycle:
    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.dirty: set[str] = set()
        self._monitoring: set[str] = set()
        self.silent: dict[str, float] = {}  # node -> when its kubelet stopped posting
        # Events to record once the write that caused them is done (a listener must not
        # write: the recorder may store an Event).
        self._to_record: list[tuple[dict[str, Any], str, str]] = []

    @property
    def store(self):  # type: ignore[no-untyped-def]
        return self.cluster.store

    def note(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        if resource != "nodes" or type_ == "DELETED":
            return
        self.dirty.add(new.obj["metadata"]["name"])
        if old is None or _conditions(old.obj).get("Ready") != _conditions(new.obj).get("Ready"):
            self._record_readiness(new.obj, old.obj if old else None)
        # NodeNotSchedulable/NodeSchedulable (the kubelet's) come from kubesim.events, which
        # watches every node write.

    def sync(self) -> bool:
        pending_events, self._to_record = self._to_record, []
        for node, state, component in pending_events:
            self._record_now(node, state, component)
        if not self.dirty:
            return False
        pending, self.dirty = self.dirty, set()
        changed = False
        for name in sorted(pending):
            found = self.store.objects["nodes"].get(name)
            if found is None:
                continue
            changed |= self._no_schedule_pass(found)
            if self._no_execute_due(found.obj):
                self._monitor_later(name)
        return changed

    def catch_up(self) -> None:
        """Run the NoExecute passes already due (a seeded node has been down for days)."""
        for name in sorted(self._monitoring):
            self._no_execute_pass(name)

    def _taint_write(self, found: Entry, taints: list[dict[str, Any]]) -> bool:
        node = copy.deepcopy(found.obj)
        spec = node.setdefault("spec", {})
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
        self.cluster.write_node(node, "kube-controller-manager")
        return True

    def _no_schedule_pass(self, found: Entry) -> bool:
        node = found.obj
        taints = list((node.get("spec") or {}).get("taints") or [])
        wanted = wanted_no_schedule(node)
        have = {
            t.get("key")
            for t in taints
            if t.get("effect") == "NoSchedule" and t.get("key") in CONTROLLER_KEYS
        }
        if have == wanted:
            return False
        now = self.store.clock.rfc3339()
        kept = [
            t
            for t in taints
            if not (t.get("effect") == "NoSchedule" and t.get("key") in have - wanted)
        ]
        kept += [
            {"key": key, "effect": "NoSchedule", "timeAdded": now} for key in sorted(wanted - have)
        ]
        return self._taint_write(found, kept)

    def _no_execute_due(self, node: dict[str, Any]) -> bool:
        wanted = wanted_no_execute(node)
        have = {
            t.get("key")
            for t in (node.get("spec") or {}).get("taints") or []
            if t.get("effect") == "NoExecute" and t.get("key") in (NOT_READY, UNREACHABLE)
        }
        return have != ({wanted} if wanted else set())

    def _monitor_later(self, name: str) -> None:
        if name in self._monitoring:
            return
        self._monitoring.add(name)
        when = self.store.clock.now() + NODE_MONITOR_PERIOD
        self.cluster.timers.at(when, lambda: self._no_execute_pass(name))

    def _no_execute_pass(self, name: str) -> None:
        """processTaintBaseEviction: swap or add the NoExecute taint, or remove it when Ready."""
        self._monitoring.discard(name)
        found = self.store.objects["nodes"].get(name)
        if found is None or not self._no_execute_due(found.obj):
            return
        wanted = wanted_no_execute(found.obj)
        taints = [
            t
            for t in (found.obj.get("spec") or {}).get("taints") or []
            if not (t.get("effect") == "NoExecute" and t.get("key") in (NOT_READY, UNREACHABLE))
        ]
        if wanted:
            taints.append(
                {"key": wanted, "effect": "NoExecute", "timeAdded": self.store.clock.rfc3339()}
            )
        self._taint_write(found, taints)

    # --- kubelets that stop and start posting status ---
    def kubelet_stops(self, name: str) -> None:
        self.store.get("nodes", None, name)
        now = self.store.clock.now()
        self.silent[name] = now
        self.cluster.timers.at(now + NODE_MONITOR_GRACE_PERIOD, lambda: self._unknown(name, now))

    def kubelet_resumes(self, name: str) -> None:
        found = self.store.get("nodes", None, name)
        self.silent.pop(name, None)
        self._set_conditions(found, "True", "KubeletReady", "kubelet is posting ready status")

    def _unknown(self, name: str, since: float) -> None:
        found = self.store.objects["nodes"].get(name)
        if found is None or self.silent.get(name) != since:
            return
        self._set_conditions(
            found, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
        )

    def _set_conditions(self, found: Entry, state: str, reason: str, message: str) -> None:
        """The controller marks a silent kubelet's conditions Unknown (Ready and the
        pressures, not NetworkUnavailable, which the network plugin owns); a kubelet that
        posts again reports Ready."""
        node = copy.deepcopy(found.obj)
        now = self.store.clock.rfc3339()
        touched = UNKNOWN_WHEN_SILENT if state == "Unknown" else ("Ready",)
        for condition in (node.get("status") or {}).get("conditions") or []:
            if condition.get("type") not in touched:
                continue
            if condition.get("status") != state:
                condition["lastTransitionTime"] = now
            condition.update({"status": state, "reason": reason, "message": message})
            if state != "Unknown":
                condition["lastHeartbeatTime"] = now
        self.store.replace("nodes", node, expected_rv=None)

    def _record_readiness(self, node: dict[str, Any], old: dict[str, Any] | None) -> None:
        ready = _conditions(node).get("Ready")
        if old is None:
            return
        self._record(node, "NodeReady" if ready == "True" else "NodeNotReady", "node-controller")

    def _record(self, node: dict[str, Any], state: str, component: str) -> None:
        self._to_record.append((node, state, component))

    def _record_now(self, node: dict[str, Any], state: str, component: str) -> None:
        self.cluster.recorder.record(
            node,
            type_=NORMAL,
            reason=state,
            message=f"Node {node['metadata']['name']} status is now: {state}",
            component=component,
        )
