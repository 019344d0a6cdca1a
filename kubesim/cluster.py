"""Cluster behaviour on top of the store: pods bound by a scheduler, GPUs counted, evictions."""

from __future__ import annotations

import collections
import copy
import threading
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim import scheduling
from kubesim.errors import ApiError
from kubesim.events import EventRecorder
from kubesim.store import Entry, Store, now_rfc3339
from kubesim.validation import invalid_error, validate_node, validate_pod

if TYPE_CHECKING:
    from kubesim.daemonsets import DaemonSetController

KINDS = {
    "nodes": "Node",
    "pods": "Pod",
    "poddisruptionbudgets": "PodDisruptionBudget",
    "events": "Event",
    "eventsv1": "Event",
    "daemonsets": "DaemonSet",
}


@dataclass
class GpuOverride:
    util: float | None = None
    xid: int | None = None  # the last XID seen; stays after recovery, as in the real exporter


@dataclass
class Cluster:
    store: Store = field(default_factory=Store)
    # Pods that hold GPUs on each node, in bind order (the exporter maps them to GPU indexes).
    pods_on_node: dict[str, dict[str, Entry]] = field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    allocated: dict[str, int] = field(default_factory=lambda: collections.defaultdict(int))
    pending: dict[str, Entry] = field(default_factory=dict)
    gpu_overrides: dict[tuple[str, int], GpuOverride] = field(default_factory=dict)
    exporter_disabled: set[str] = field(default_factory=set)
    daemonsets: DaemonSetController | None = None  # installed by the scenario's seeding

    def __post_init__(self) -> None:
        self.store.listeners.append(self._track)
        self._wake = threading.Event()
        self.events = EventRecorder(self.store)

    # --- GPU accounting, kept up to date by every write ---
    def _track(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        if resource == "pods":
            if old is not None:
                self._unaccount(old)
            if type_ != "DELETED":
                self._account(new)
        elif resource == "nodes" and type_ != "DELETED":
            self._wake.set()  # a node change may make a pending pod schedulable

    def _pod_key(self, pod: dict[str, Any]) -> str:
        return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"

    def _account(self, e: Entry) -> None:
        node = (e.obj.get("spec") or {}).get("nodeName")
        key = self._pod_key(e.obj)
        if not node:
            self.pending[key] = e
            self._wake.set()
            return
        if scheduling.is_active(e.obj):
            self.pods_on_node[node][key] = e
            self.allocated[node] += scheduling.gpu_request(e.obj)

    def _unaccount(self, e: Entry) -> None:
        node = (e.obj.get("spec") or {}).get("nodeName")
        key = self._pod_key(e.obj)
        if not node:
            self.pending.pop(key, None)
            return
        if self.pods_on_node[node].pop(key, None) is not None:
            self.allocated[node] -= scheduling.gpu_request(e.obj)
            self._wake.set()

    # --- nodes ---
    def validate(self, resource: str, obj: dict[str, Any]) -> None:
        errors = []
        if resource == "nodes":
            errors = validate_node(obj)
        elif resource == "pods":
            errors = validate_pod(obj)
        if errors:
            name = (obj.get("metadata") or {}).get("name") or ""
            raise invalid_error(KINDS.get(resource, resource), name, errors)

    # --- pods ---
    def create_pod(self, pod: dict[str, Any], *, dry_run: bool = False) -> Entry:
        pod = copy.deepcopy(pod)
        pod.setdefault("spec", {})
        pod.setdefault("status", {})
        node_name = pod["spec"].get("nodeName")
        with self.store.lock:
            if node_name:
                pod["status"] = self._running_status(pod, node_name)
            else:
                pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
                chosen, message = self._choose(pod)
                if chosen:
                    pod["spec"]["nodeName"] = chosen
                    pod["status"] = self._running_status(pod, chosen)
                else:
                    pod["status"]["conditions"] = [self._unschedulable(message)]
            return self.store.create("pods", pod, dry_run=dry_run)

    def _choose(self, pod: dict[str, Any]) -> tuple[str | None, str]:
        _, nodes = self.store.list("nodes", None)
        return scheduling.choose_node(pod, [n.obj for n in nodes], self.allocated)

    def _running_status(self, pod: dict[str, Any], node_name: str) -> dict[str, Any]:
        now = now_rfc3339()
        containers = pod["spec"].get("containers") or []
        status = dict(pod.get("status") or {})
        if status.get("phase") in ("Succeeded", "Failed"):
            return status
        return {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
            ],
            "hostIP": self._node_ip(node_name),
            "podIP": self._pod_ip(pod),
            "startTime": now,
            "qosClass": "BestEffort",
            "containerStatuses": [
                {
                    "name": c.get("name", "main"),
                    "ready": True,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "imageID": "",
                    "started": True,
                    "state": {"running": {"startedAt": now}},
                }
                for c in containers
            ],
        }

    @staticmethod
    def _pod_ip(pod: dict[str, Any]) -> str:
        number = zlib.crc32(
            f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}".encode()
        )
        return f"10.{244 + number % 8}.{(number >> 8) % 256}.{(number >> 16) % 254 + 1}"

    def _node_ip(self, node_name: str) -> str:
        node = self.store.objects["nodes"].get(node_name)
        for address in ((node.obj.get("status") or {}).get("addresses") or []) if node else []:
            if address.get("type") == "InternalIP":
                return str(address.get("address"))
        return ""

    @staticmethod
    def _unschedulable(message: str) -> dict[str, Any]:
        return {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": now_rfc3339(),
            "lastProbeTime": None,
        }

    def schedule_pending(self) -> int:
        """Bind the pending pods that fit now; refresh the reasons of those that still do not."""
        bound = 0
        with self.store.lock:
            for e in list(self.pending.values()):
                pod = copy.deepcopy(e.obj)
                chosen, message = self._choose(pod)
                if chosen:
                    pod["spec"]["nodeName"] = chosen
                    pod["status"] = self._running_status(pod, chosen)
                    bound += 1
                else:
                    conditions = pod["status"].get("conditions") or []
                    if conditions and conditions[0].get("message") == message:
                        continue
                    pod["status"]["conditions"] = [self._unschedulable(message)]
                self.store.replace("pods", pod, expected_rv=None)
        return bound

    def run_scheduler(self, stop: threading.Event, interval: float = 0.5) -> None:
        while not stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self.pending:
                self.schedule_pending()

    # --- eviction, respecting PodDisruptionBudgets ---
    def evict(self, namespace: str, name: str, *, dry_run: bool = False) -> None:
        with self.store.lock:
            pod = self.store.get("pods", namespace, name).obj
            labels = pod["metadata"].get("labels") or {}
            for pdb_entry in self.store.list("poddisruptionbudgets", namespace)[1]:
                pdb = pdb_entry.obj
                selector = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
                if not selector or any(labels.get(k) != v for k, v in selector.items()):
                    continue
                healthy, desired = self._pdb_health(pdb)
                if healthy - desired <= 0:
                    pdb_name = pdb["metadata"]["name"]
                    raise ApiError(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        {
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": f"The disruption budget {pdb_name} needs "
                                    f"{desired} healthy pods and has {healthy} "
                                    "currently",
                                }
                            ]
                        },
                    )
            self.store.delete("pods", namespace, name, dry_run=dry_run)

    def _pdb_health(self, pdb: dict[str, Any]) -> tuple[int, int]:
        spec = pdb.get("spec") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        namespace = pdb["metadata"].get("namespace")
        matching = [
            e.obj
            for e in self.store.list("pods", namespace)[1]
            if all((e.obj["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
        ]
        healthy = sum(1 for p in matching if (p.get("status") or {}).get("phase") == "Running")
        expected = len(matching)

        def amount(value: Any) -> int:
            text = str(value)
            if text.endswith("%"):
                return -(-int(text[:-1]) * expected // 100)  # rounded up, as the real one
            return int(text)

        if spec.get("minAvailable") is not None:
            desired = amount(spec["minAvailable"])
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - amount(spec["maxUnavailable"]))
        else:
            desired = 0
        return healthy, desired

    def pdb_with_status(self, e: Entry) -> dict[str, Any]:
        pdb = copy.deepcopy(e.obj)
        healthy, desired = self._pdb_health(pdb)
        pdb["status"] = {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": max(0, healthy - desired),
            "expectedPods": healthy,
            "observedGeneration": 1,
        }
        return pdb
