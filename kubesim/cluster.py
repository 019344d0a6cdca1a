"""Cluster behaviour on top of the store: pods bound by a scheduler, GPUs counted, and the
controllers (graceful termination, disruption budgets, node lifecycle) that react to writes.

Controllers run right after the write that wakes them, under the store's lock, each change
its own write: what a client reads next already shows their reaction, as it would a few
milliseconds later on a real cluster. Later work (a grace period ending, a NoExecute
taint) waits on the cluster clock's timers.
"""

from __future__ import annotations

import collections
import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim import apply, scheduling
from kubesim.addresses import node_ip, pod_ip
from kubesim.admission import admit_pod
from kubesim.clock import Timers
from kubesim.deadlines import ActiveDeadlines
from kubesim.disruption import Disruption
from kubesim.errors import GROUPS
from kubesim.events import EventRecorder
from kubesim.lifecycle import NodeLifecycle
from kubesim.store import Entry, Store
from kubesim.termination import DeleteOptions, Termination, check_before_delete
from kubesim.validation import invalid_error, validate_node, validate_pdb, validate_pod

if TYPE_CHECKING:
    from kubesim.daemonsets import DaemonSetController

KINDS = {
    "nodes": "Node",
    "pods": "Pod",
    "poddisruptionbudgets": "PodDisruptionBudget",
    "events": "Event",
    "eventsv1": "Event",
    "daemonsets": "DaemonSet",
    "resourceslices": "ResourceSlice",
    "deviceclasses": "DeviceClass",
    "resourceclaims": "ResourceClaim",
    "resourceclaimtemplates": "ResourceClaimTemplate",
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
    # node -> the GPU devices its pods hold (GPUs, MIG instances or shared replicas)
    allocated: dict[str, int] = field(default_factory=lambda: collections.defaultdict(int))
    # node -> every extended resource its pods request, as the scheduler counts them
    requested: dict[str, collections.Counter[str]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )
    pending: dict[str, Entry] = field(default_factory=dict)
    gpu_overrides: dict[tuple[str, int], GpuOverride] = field(default_factory=dict)
    exporter_disabled: set[str] = field(default_factory=set)
    daemonsets: DaemonSetController | None = None  # installed by the scenario's seeding
    # node -> the pod key holding each GPU slot: a pod keeps its devices until it is gone
    # (terminating included), and the others keep theirs when it goes, as the kubelet's
    # device manager assigns them. The exporter and the workload model read the same map.
    device_slots: dict[str, list[str | None]] = field(default_factory=dict)
    # The kubelet's first status for a pod bound to a node: a hook may answer instead of the
    # running status (the workload model's pods whose container cannot start).
    start_hooks: list[Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]] = field(
        default_factory=list
    )

    def __post_init__(self) -> None:
        self.store.listeners.append(self._track)
        self._wake = threading.Event()
        self.timers = Timers(self.store.clock, self.store.lock)
        self.timers.after = self.settle
        # Events: recorded as the components' client-go recorders write them; the recorder
        # also watches the store for what the kubelet and the scheduler would notice.
        self.events = EventRecorder(self.store)
        self.recorder = self.events
        self.termination = Termination(self)
        self.deadlines = ActiveDeadlines(self)
        self.disruption = Disruption(self)
        self.lifecycle = NodeLifecycle(self)
        # Pods by namespace, as the watch cache indexes them (budgets read one namespace).
        self.pods_by_namespace: dict[str, set[str]] = collections.defaultdict(set)
        # pending pod -> (resourceVersion, what the scheduler's filters read of it)
        self._signatures: dict[str, tuple[str, str]] = {}
        # A count of node writes, and per ask (_static_signature) the nodes that passed the
        # filters before resources at that count, and why the others did not.
        self._nodes_version = 0
        self._static: dict[
            str, tuple[int, list[tuple[str, scheduling.Resources]], collections.Counter[str], int]
        ]
        self._static = {}

    def settle(self) -> None:
        """Let the controllers react to what was just written (and to their own writes)."""
        with self.store.lock:
            for _ in range(20):
                if not (self.lifecycle.sync() | self.disruption.sync()):
                    return

    def pods_in(self, namespace: str | None) -> list[Entry]:
        pods = self.store.objects["pods"]
        if namespace is None:
            return list(pods.values())
        return [pods[k] for k in self.pods_by_namespace.get(namespace, ()) if k in pods]

    # --- GPU accounting, kept up to date by every write ---
    def _track(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        if resource == "pods":
            if old is not None:
                self._unaccount(old)
            key = self._pod_key(new.obj)
            if type_ == "DELETED":
                self.pods_by_namespace[new.obj["metadata"].get("namespace") or ""].discard(key)
            else:
                self._account(new)
                self.pods_by_namespace[new.obj["metadata"].get("namespace") or ""].add(key)
        elif resource == "nodes":
            self._nodes_version += 1
            if type_ != "DELETED":
                self._wake.set()  # a node change may make a pending pod schedulable
        self.lifecycle.note(resource, type_, new, old)
        self.disruption.note(resource, type_, new, old)

    def _pod_key(self, pod: dict[str, Any]) -> str:
        return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"

    def _account(self, e: Entry) -> None:
        node = (e.obj.get("spec") or {}).get("nodeName")
        key = self._pod_key(e.obj)
        if not node:
            self.pending[key] = e
            self._wake.set()
            return
        self._signatures.pop(key, None)
        if scheduling.is_active(e.obj):
            self.pods_on_node[node][key] = e
            asked = scheduling.extended_request(e.obj)
            self.requested[node].update(asked)
            self.allocated[node] += scheduling.devices_of(asked)

    def _unaccount(self, e: Entry) -> None:
        node = (e.obj.get("spec") or {}).get("nodeName")
        key = self._pod_key(e.obj)
        if not node:
            self.pending.pop(key, None)
            return
        if self.pods_on_node[node].pop(key, None) is not None:
            asked = scheduling.extended_request(e.obj)
            self.requested[node].subtract(asked)
            self.allocated[node] -= scheduling.devices_of(asked)
            self._wake.set()

    # --- nodes ---
    def validate(self, resource: str, obj: dict[str, Any]) -> None:
        errors = []
        if resource == "nodes":
            errors = validate_node(obj)
        elif resource == "pods":
            errors = validate_pod(obj)
        elif resource == "poddisruptionbudgets":
            errors = validate_pdb(obj)
        if errors:
            name = (obj.get("metadata") or {}).get("name") or ""
            group = GROUPS.get(resource, "")
            raise invalid_error(KINDS.get(resource, resource), name, errors, group)

    # --- pods ---
    def create_pod(self, pod: dict[str, Any], *, dry_run: bool = False) -> Entry:
        """Store a new pod (the dict becomes the store's: callers pass a fresh one)."""
        admit_pod(pod)
        pod.setdefault("status", {})
        node_name = pod["spec"].get("nodeName")
        with self.store.lock:
            if node_name:
                pod["status"] = self._running_status(pod, node_name)
            else:
                pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod)}
                chosen, message = self._choose(pod)
                if chosen:
                    pod["spec"]["nodeName"] = chosen
                    pod["status"] = self._running_status(pod, chosen)
                else:
                    pod["status"]["conditions"] = [self._unschedulable(message)]
            return self.store.create("pods", pod, dry_run=dry_run)

    def _choose(self, pod: dict[str, Any]) -> tuple[str | None, str]:
        if pod["spec"].get("resourceClaims"):
            _, nodes = self.store.list("nodes", None)
            return None, scheduling.claims_reason(pod, len(nodes))
        # The filters before resources depend on the pod's ask and the nodes only: kept per
        # ask until a node changes, so a thousand-node cluster counts GPUs on what is left.
        key = _static_signature(pod)
        cached = self._static.get(key)
        if cached is None or cached[0] != self._nodes_version:
            if len(self._static) > 1000:
                self._static.clear()  # asks seen once (a test's pods) do not pile up
            _, nodes = self.store.list("nodes", None)
            eligible, reasons = scheduling.static_filter(pod, [n.obj for n in nodes])
            capacities = [(n["metadata"]["name"], scheduling.node_resources(n)) for n in eligible]
            cached = self._static[key] = (self._nodes_version, capacities, reasons, len(nodes))
        _, capacities, reasons, total = cached
        return scheduling.choose_among(pod, capacities, reasons, total, self.requested)

    def gpu_holders(self, name: str, devices: int) -> list[Entry | None]:
        """The pod holding each of the node's `devices` GPU slots (None: free); a newcomer
        takes the lowest free slots."""
        pods = self.pods_on_node.get(name, {})
        slots = [k if k in pods else None for k in self.device_slots.get(name, [None] * devices)]
        slots = slots[:devices] + [None] * (devices - len(slots))
        held = collections.Counter(k for k in slots if k)
        for key, found in pods.items():
            wanted = scheduling.gpu_request(found.obj) - held[key]
            for index, holder in enumerate(slots):
                if wanted <= 0:
                    break
                if holder is None:
                    slots[index] = key
                    wanted -= 1
        self.device_slots[name] = slots
        return [pods[k] if k else None for k in slots]

    def _running_status(self, pod: dict[str, Any], node_name: str) -> dict[str, Any]:
        status = dict(pod.get("status") or {})
        if status.get("phase") in ("Succeeded", "Failed"):
            return status
        running = self._started_status(pod, node_name)
        for hook in self.start_hooks:
            answer = hook(pod, running)
            if answer is not None:
                return answer
        return running

    def _started_status(self, pod: dict[str, Any], node_name: str) -> dict[str, Any]:
        now = self.store.clock.rfc3339()
        containers = pod["spec"].get("containers") or []
        return {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
            ],
            "hostIP": node_ip(self.store, node_name),
            "hostIPs": [{"ip": node_ip(self.store, node_name)}],
            "podIP": pod_ip(pod),
            "podIPs": [{"ip": pod_ip(pod)}],
            "startTime": now,
            "qosClass": qos_class(pod),
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

    def _unschedulable(self, message: str) -> dict[str, Any]:
        return {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": self.store.clock.rfc3339(),
            "lastProbeTime": None,
        }

    def schedule_pending(self) -> int:
        """Bind the pending pods that fit now, oldest first (the scheduling queue's FIFO);
        refresh the reasons of those that still do not."""
        bound = 0
        with self.store.lock:
            # Pods that ask for the same thing get the same answer until a bind changes the
            # free GPUs: a queue of identical jobs costs one scheduling cycle, not one each.
            answers: dict[str, tuple[str | None, str]] = {}
            waiting = sorted(
                self.pending.items(),
                key=lambda item: (item[1].obj["metadata"].get("creationTimestamp", ""), item[0]),
            )
            for key, e in waiting:
                signature = self._signature(key, e)
                if signature not in answers:
                    answers[signature] = self._choose(e.obj)
                chosen, message = answers[signature]
                if chosen:
                    answers.clear()
                    pod = copy.deepcopy(e.obj)
                    pod["spec"]["nodeName"] = chosen
                    pod["status"] = self._running_status(pod, chosen)
                    bound += 1
                else:
                    conditions = (e.obj.get("status") or {}).get("conditions") or []
                    if conditions and conditions[0].get("message") == message:
                        continue
                    pod = copy.deepcopy(e.obj)
                    pod["status"]["conditions"] = [self._unschedulable(message)]
                self.store.replace("pods", pod, expected_rv=None)
            self.settle()
        return bound

    def _signature(self, key: str, e: Entry) -> str:
        rv = e.obj["metadata"].get("resourceVersion", "")
        cached = self._signatures.get(key)
        if cached is None or cached[0] != rv:
            cached = self._signatures[key] = (rv, _scheduling_signature(e.obj))
        return cached[1]

    def run_scheduler(self, stop: threading.Event, interval: float = 0.5) -> None:
        while not stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self.pending:
                self.schedule_pending()

    # --- deletes and evictions ---
    def delete(
        self, resource: str, namespace: str | None, name: str, options: DeleteOptions
    ) -> Entry:
        with self.store.lock:
            current = self.store.get(resource, namespace, name)
            check_before_delete(
                resource,
                KINDS.get(resource, resource),
                current,
                options.uid,
                options.resource_version,
            )
            answer = self.termination.delete(resource, namespace, name, options)
            self.settle()
            return answer

    def evict(
        self, namespace: str, name: str, eviction: dict[str, Any], *, dry_run: bool = False
    ) -> None:
        with self.store.lock:
            self.disruption.evict(namespace, name, eviction, dry_run)
            self.settle()

    # --- nodes written by kubesim's own components ---
    def write_node(self, node: dict[str, Any], manager: str) -> Entry:
        """A controller's or kubelet's write, recorded in managedFields under `manager`."""
        current = self.store.get("nodes", None, node["metadata"]["name"])
        node = apply.record_update(current.obj, node, manager, self.store.clock.rfc3339())
        return self.store.replace("nodes", node, expected_rv=None)


def _static_signature(pod: dict[str, Any]) -> str:
    """What the scheduler's filters before resources read of a pod."""
    spec = pod.get("spec") or {}
    # repr, not JSON: a cache key needs no canonical form, and pods from one template repeat it.
    return repr((spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")))


def _scheduling_signature(pod: dict[str, Any]) -> str:
    """What the scheduler's filters read of a pod."""
    return f"{_static_signature(pod)}/{sorted(scheduling.extended_request(pod).items())}"


def qos_class(pod: dict[str, Any]) -> str:
    """The pod's QoS class as pkg/apis/core/helper/qos computes it (CPU and memory)."""
    requests_seen = limits_seen = False
    guaranteed = True
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        for name in ("cpu", "memory"):
            requests_seen |= name in requests
            limits_seen |= name in limits
            limit = limits.get(name)
            if limit is None or str(requests.get(name, limit)) != str(limit):
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
