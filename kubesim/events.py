"""Events, as the cluster's components record them, and their two API views.

The components are kubesim's own: the scheduler records `FailedScheduling` (through the
events.k8s.io API, as kube-scheduler does: reportingController, action, eventTime, no
source), the kubelet records `NodeNotSchedulable`/`NodeSchedulable` when a node is cordoned
or uncordoned and `Killing` when a pod on its node is deleted or evicted (through the
core/v1 API: source, first/lastTimestamp, count). A node's events name it with its name as
UID, in namespace `default`, which is where `kubectl describe node` looks.

Events are stored once, as core/v1 objects; the events.k8s.io/v1 view is kept beside them
as a converted copy (resource `eventsv1`), so both APIs list, get and watch them.
"""

from __future__ import annotations

import collections
import contextlib
import time
from typing import Any

from kubesim.errors import ApiError
from kubesim.store import Entry, Store

NORMAL = "Normal"
WARNING = "Warning"
SCHEDULER = "default-scheduler"
SCHEDULER_INSTANCE = "default-scheduler-kubesim"
KUBELET = "kubelet"
# The API server drops events after --event-ttl (1 h); kubesim also keeps at most this many.
EVENT_TTL_SECONDS = 3600.0
MAX_EVENTS = 5000
# Identical events within this window are one event whose count (or series) grows.
AGGREGATE_SECONDS = 600.0
V1_RESOURCE = "eventsv1"


def reference(obj: dict[str, Any], field_path: str = "") -> dict[str, Any]:
    meta = obj["metadata"]
    ref = {
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": obj.get("apiVersion", "v1"),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if not ref["namespace"]:
        del ref["namespace"]
    if field_path:
        ref["fieldPath"] = field_path
    return ref


def to_v1(core: dict[str, Any]) -> dict[str, Any]:
    """The events.k8s.io/v1 form of a core/v1 Event (the API server's conversion)."""
    v1: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": core["metadata"],
        "eventTime": core.get("eventTime"),
        "reportingController": core.get("reportingComponent", ""),
        "reportingInstance": core.get("reportingInstance", ""),
        "reason": core.get("reason", ""),
        "regarding": core.get("involvedObject", {}),
        "note": core.get("message", ""),
        "type": core.get("type", ""),
    }
    for core_key, v1_key in (
        ("series", "series"),
        ("action", "action"),
        ("related", "related"),
        ("firstTimestamp", "deprecatedFirstTimestamp"),
        ("lastTimestamp", "deprecatedLastTimestamp"),
        ("count", "deprecatedCount"),
    ):
        if core.get(core_key):
            v1[v1_key] = core[core_key]
    source = core.get("source") or {}
    if source:
        v1["deprecatedSource"] = source
    return v1


def to_core(v1: dict[str, Any]) -> dict[str, Any]:
    """The core/v1 form of an events.k8s.io/v1 Event."""
    core: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": v1["metadata"],
        "involvedObject": v1.get("regarding") or {},
        "reason": v1.get("reason", ""),
        "message": v1.get("note", ""),
        "source": v1.get("deprecatedSource") or {},
        "firstTimestamp": v1.get("deprecatedFirstTimestamp"),
        "lastTimestamp": v1.get("deprecatedLastTimestamp"),
        "type": v1.get("type", ""),
        "eventTime": v1.get("eventTime"),
        "reportingComponent": v1.get("reportingController", ""),
        "reportingInstance": v1.get("reportingInstance", ""),
    }
    for key, core_key in (
        ("deprecatedCount", "count"),
        ("series", "series"),
        ("action", "action"),
        ("related", "related"),
    ):
        if v1.get(key):
            core[core_key] = v1[key]
    return core


def _unschedulable_message(pod: dict[str, Any] | None) -> str | None:
    for condition in ((pod or {}).get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return str(condition.get("message", ""))
    return None


class EventRecorder:
    """Records the events kubesim's components emit, as store listeners: whoever changes a
    pod or a node (an API request, the scheduler, a test), the event follows."""

    def __init__(self, store: Store, *, max_events: int = MAX_EVENTS) -> None:
        self.store = store
        self.max_events = max_events
        self._recorded: collections.deque[tuple[float, str, str]] = collections.deque()
        # (involved uid, reason, message, component) -> the event that a repeat updates
        self._similar: dict[tuple[str, str, str, str], tuple[float, str, str]] = {}
        self._last_ns = 0
        store.listeners.append(self._observe)

    # --- what the components notice ---
    def _observe(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        if resource == "pods":
            self._pod_changed(type_, new.obj, old.obj if old else None)
        elif resource == "nodes" and type_ == "MODIFIED" and old is not None:
            self._node_changed(new.obj, old.obj)
        elif resource == "events":
            self._mirror(type_, new.obj)

    def _pod_changed(self, type_: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        if type_ != "DELETED":
            message = _unschedulable_message(pod)
            if message is not None and message != _unschedulable_message(old):
                self.scheduler_event(pod, "Warning", "FailedScheduling", "Scheduling", message)
            began = pod["metadata"].get("deletionTimestamp") and not (
                old and old["metadata"].get("deletionTimestamp")
            )
            if began:
                self._killing(pod)
        elif not pod["metadata"].get("deletionTimestamp"):
            self._killing(pod)  # deleted at once, without a grace period

    def _killing(self, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            return
        for container in (pod.get("spec") or {}).get("containers") or []:
            name = container.get("name", "")
            self.kubelet_event(
                node,
                reference(pod, f"spec.containers{{{name}}}"),
                "Normal",
                "Killing",
                f"Stopping container {name}",
            )

    def _node_changed(self, node: dict[str, Any], old: dict[str, Any]) -> None:
        now = bool((node.get("spec") or {}).get("unschedulable"))
        if now == bool((old.get("spec") or {}).get("unschedulable")):
            return
        status = "NodeNotSchedulable" if now else "NodeSchedulable"
        name = node["metadata"]["name"]
        # The kubelet refers to its node with the node's name as UID.
        ref = {"kind": "Node", "name": name, "uid": name}
        self.kubelet_event(name, ref, "Normal", status, f"Node {name} status is now: {status}")

    # --- the hook other components call (kubesim.recorder's interface) ---
    def record(
        self,
        involved: dict[str, Any],
        *,
        type_: str,
        reason: str,
        message: str,
        component: str,
    ) -> None:
        """An event about `involved` (a node or a pod, as stored) through the core/v1 API,
        as the component's client-go recorder writes it."""
        if involved.get("kind") == "Node":
            name = involved["metadata"]["name"]
            # Node events name the node with its name as UID (nodeutil.RecordNodeStatusChange).
            ref, host = {"kind": "Node", "name": name, "uid": name}, name
        else:
            ref, host = reference(involved), (involved.get("spec") or {}).get("nodeName", "")
        self.core_event(component, host, ref, type_, reason, message)

    # --- the two recorders ---
    def kubelet_event(
        self, node: str, ref: dict[str, Any], type_: str, reason: str, message: str
    ) -> None:
        self.core_event(KUBELET, node, ref, type_, reason, message)

    def core_event(
        self,
        component: str,
        host: str,
        ref: dict[str, Any],
        type_: str,
        reason: str,
        message: str,
    ) -> None:
        """An event through the core/v1 API, as client-go's record package writes it."""
        now = self.store.clock.rfc3339()
        source = {"component": component, "host": host} if host else {"component": component}
        self._record(
            ref,
            component,
            reason,
            message,
            {
                "involvedObject": ref,
                "reason": reason,
                "message": message,
                "source": source,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "type": type_,
                "eventTime": None,
                "reportingComponent": component,
                "reportingInstance": host,
            },
        )

    def scheduler_event(
        self, pod: dict[str, Any], type_: str, reason: str, action: str, note: str
    ) -> None:
        """An event through the events.k8s.io API, as kube-scheduler writes it."""
        ref = reference(pod)
        self._record(
            ref,
            SCHEDULER,
            reason,
            note,
            {
                "involvedObject": ref,
                "reason": reason,
                "message": note,
                "source": {},
                "firstTimestamp": None,
                "lastTimestamp": None,
                "type": type_,
                "eventTime": self.store.clock.rfc3339_micro(),
                "action": action,
                "reportingComponent": SCHEDULER,
                "reportingInstance": SCHEDULER_INSTANCE,
            },
        )

    def _record(
        self, ref: dict[str, Any], component: str, reason: str, message: str, body: dict[str, Any]
    ) -> None:
        with self.store.lock:
            self._expire()
            key = (str(ref.get("uid", "")), reason, message, component)
            if self._repeat(key, body):
                return
            namespace = ref.get("namespace") or "default"
            name = f"{ref['name']}.{self._unique_ns():x}"
            event = {
                "kind": "Event",
                "apiVersion": "v1",
                "metadata": {"name": name, "namespace": namespace},
            }
            self.store.create("events", {**event, **body})
            stamp = time.monotonic()
            self._recorded.append((stamp, namespace, name))
            self._similar[key] = (stamp, namespace, name)

    def _repeat(self, key: tuple[str, str, str, str], body: dict[str, Any]) -> bool:
        """Count a repeat into the event it repeats: `count` and `lastTimestamp` for a core
        event, `series` for an events.k8s.io one."""
        found = self._similar.get(key)
        if found is None or time.monotonic() - found[0] > AGGREGATE_SECONDS:
            return False
        try:
            current = self.store.get("events", found[1], found[2]).obj
        except ApiError:
            return False
        updated = dict(current)
        if body.get("eventTime"):
            count = (current.get("series") or {}).get("count", 1) + 1
            updated["series"] = {
                "count": count,
                "lastObservedTime": self.store.clock.rfc3339_micro(),
            }
        else:
            updated["count"] = int(current.get("count", 1)) + 1
            updated["lastTimestamp"] = body["lastTimestamp"]
        self.store.replace("events", updated, expected_rv=None)
        return True

    def _unique_ns(self) -> int:
        self._last_ns = max(time.time_ns(), self._last_ns + 1)
        return self._last_ns

    def _expire(self) -> None:
        cutoff = time.monotonic() - EVENT_TTL_SECONDS
        while self._recorded and (
            len(self._recorded) >= self.max_events or self._recorded[0][0] < cutoff
        ):
            _, namespace, name = self._recorded.popleft()
            with contextlib.suppress(ApiError):  # a client may have deleted it already
                self.store.delete("events", namespace, name)

    def _mirror(self, type_: str, core: dict[str, Any]) -> None:
        meta = core["metadata"]
        try:
            if type_ == "ADDED":
                self.store.create(V1_RESOURCE, to_v1(core))
            elif type_ == "MODIFIED":
                self.store.replace(V1_RESOURCE, to_v1(core), expected_rv=None)
            else:
                self.store.delete(V1_RESOURCE, meta.get("namespace"), meta["name"])
        except ApiError:
            pass  # the copy is already as asked


# --- `kubectl get events`: the API server's Table for events ---


def _column(name: str, description: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "type": "string",
        "format": fmt,
        "description": description,
        "priority": priority,
    }


EVENT_COLUMNS = [
    _column(
        "Last Seen", "The time at which the most recent occurrence of this event was recorded."
    ),
    _column("Type", "Type of this event (Normal, Warning)."),
    _column("Reason", "A short, machine understandable reason for the transition."),
    _column("Object", "The object that this event is about."),
    _column("Subobject", "The piece of the object the event is about (a field path).", 1),
    _column("Source", "The component reporting this event.", 1),
    _column("Message", "A human-readable description of the status of this operation."),
    _column("First Seen", "The time at which the event was first recorded.", 1),
    _column("Count", "The number of times this event has occurred.", 1),
    _column("Name", "Name must be unique within a namespace.", 1, "name"),
]


def event_cells(obj: dict[str, Any], age: Any) -> list[Any]:
    """The printer's cells (always the wide set: the server prints for any client)."""
    event = to_core(obj) if obj.get("apiVersion") == "events.k8s.io/v1" else obj

    def since(stamp: str | None) -> str:
        # MicroTime carries microseconds; the age needs seconds only.
        return str(age(stamp.split(".")[0] + "Z" if stamp and "." in stamp else stamp))

    first = since(event.get("firstTimestamp") or event.get("eventTime"))
    last = since(event["lastTimestamp"]) if event.get("lastTimestamp") else first
    count = event.get("count") or 1
    series = event.get("series")
    if series:
        last, count = since(series.get("lastObservedTime")), series.get("count", 1)
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    origin = source.get("component") or event.get("reportingComponent", "")
    host = source.get("host") or event.get("reportingInstance", "")
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{origin}, {host}" if host else origin,
        str(event.get("message", "")).strip(),
        first,
        count,
        event["metadata"]["name"],
    ]
