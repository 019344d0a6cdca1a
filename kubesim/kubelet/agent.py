"""The kubelets of a scenario's nodes, against a real API server.

What each does, as the kubelet and the GPU device plugin do it:
- registers its Node (capacity, allocatable, conditions, addresses, the scenario's labels
  and taints as `--node-labels`/`--register-with-taints` would give them), then posts the
  node status; the TaintNodesByCondition admission adds `not-ready:NoSchedule` at creation
  and the node lifecycle controller takes it off once Ready;
- renews a Lease in `kube-node-lease` every `LEASE_RENEW_SECONDS` (the node lifecycle
  controller's heartbeat), the nodes' renewals spread over the interval as independent
  kubelets' are, and posts the Ready condition every `STATUS_SECONDS` (both can be made
  longer for thousands of nodes: `Heartbeats`);
- starts the pods bound to its nodes (status Running, as the kubelet's status manager
  writes it), ends a pod that asks for it (`kubesim.io/run-seconds`: Succeeded, or Failed
  with `kubesim.io/exit-reason`), and completes a graceful deletion once the grace period
  has passed (the final status, then a DELETE with grace 0 and the pod's UID);
- a node can be "lost": its heartbeats stop, and the real controllers react.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from kubesim import addresses, dra
from kubesim.cluster import qos_class
from kubesim.deadlines import deadline_exceeded, enforced
from kubesim.kubelet import owners
from kubesim.kubelet.mirror import TERMINAL, MirrorCluster
from kubesim.scenario import Scenario, node_object, pod_object
from kubesim.seeding import placed_pod
from kubesim.termination import Termination

log = logging.getLogger("kubesim.kubelet")

LEASE_RENEW_SECONDS = 10.0
LEASE_DURATION_SECONDS = 40
STATUS_SECONDS = 60.0
RUN_SECONDS = "kubesim.io/run-seconds"
# A test that writes a pod's status itself (playing the kubelet for that pod) says so: the
# kubelets then leave the pod's status alone (a graceful deletion still completes).
MANUAL_STATUS = "kubesim.io/status"
EXIT_REASON = "kubesim.io/exit-reason"  # e.g. OOMKilled, Error; absent: Completed
KUBELET_VERSION = "v1.37.2"


@dataclass(frozen=True)
class Heartbeats:
    """How often each node renews its Lease and posts its Ready condition, and how long a
    Lease holds. The defaults are a kubelet's (`nodeLeaseDurationSeconds` 40, renewed at a
    quarter of it); one Python process playing thousands of kubelets renews less often."""

    lease_renew_seconds: float = LEASE_RENEW_SECONDS
    lease_duration_seconds: int = LEASE_DURATION_SECONDS
    status_seconds: float = STATUS_SECONDS


def _created(create: Callable[[], Any]) -> None:
    """Create an object that may already be there (a restarted kubelet)."""
    try:
        create()
    except ApiException as error:
        if error.status != 409:
            raise


def unread(response: Any) -> None:
    """A write's answer, left unread (its connection back to the pool): the client's model
    of a node or pod costs milliseconds of CPU to build, and nobody reads it."""
    response.drain_conn()
    response.release_conn()


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Kubelet:
    def __init__(
        self,
        api: client.ApiClient,
        scenario: Scenario,
        *,
        heartbeats: Heartbeats | None = None,
        workers: int = 1,
    ) -> None:
        self.api = api
        self.heartbeats = heartbeats or Heartbeats()
        # Registration and the scenario's pods in this many threads (1: one after another).
        self.workers = workers
        self.core = client.CoreV1Api(api)
        self.leases = client.CoordinationV1Api(api)
        self.scenario = scenario
        self.mirror = MirrorCluster()
        self.nodes: dict[str, dict[str, Any]] = {}  # name -> the object registered
        self.lost: set[str] = set()
        self.never_ready: set[str] = set()
        self.namespaces: set[str] = set()  # those there once the scenario was seeded
        # The scenario's pending pods the scheduler bound once they were seeded.
        self.pending_bound: set[tuple[str, str]] = set()
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._timers: list[tuple[float, str, Callable[[], None]]] = []
        self._started: set[str] = set()  # pod UIDs whose Running status was posted
        self._ending: set[str] = set()  # pod UIDs with an end scheduled
        # Nodes whose registration is done: the heartbeats renew these alone, and run while
        # thousands of others still register (each kubelet renews from its own start).
        self.registered: set[str] = set()
        self._heartbeats: threading.Thread | None = None
        # With more than one worker, pods start (their Running status posted) in these
        # threads: a kubelet has a worker a pod, and one thread posting every start for
        # 5,000 nodes started about five pods a second. None: in the watch thread.
        self._starts = ThreadPoolExecutor(workers) if workers > 1 else None

    def close(self) -> None:
        """Stop every thread's work; starts not yet posted are dropped (the process ends, as
        a kubelet's would, without waiting on an API server that may be gone)."""
        self.stop.set()
        if self._starts is not None:
            self._starts.shutdown(wait=False, cancel_futures=True)

    # -- registration -------------------------------------------------------------------

    def scenario_nodes(self) -> list[tuple[dict[str, Any], Any]]:
        created = now_rfc3339()
        return [
            (node_object(group, index, created), group)
            for group in self.scenario.groups
            for index in range(group.count)
        ]

    def register(self) -> None:
        names = []
        for node, group in self.scenario_nodes():
            name = node["metadata"]["name"]
            node["metadata"].pop("creationTimestamp", None)
            node["status"]["nodeInfo"]["kubeletVersion"] = KUBELET_VERSION
            node["status"]["nodeInfo"]["kubeProxyVersion"] = KUBELET_VERSION
            self.nodes[name] = node
            if not group.ready:
                self.never_ready.add(name)  # it never reports: the controller decides
                self.lost.add(name)
            names.append(name)
        self._each(self.register_node, names)
        self.publish_devices()

    def publish_devices(self) -> None:
        """As NVIDIA's DRA driver does on the nodes it serves (`gpu.dra`): its chart's
        DeviceClasses, and each node's ResourceSlice from the node's kubelet plugin."""
        slices = [
            group.resource_slice(node["metadata"]["name"])
            for node, group in self.scenario_nodes()
            if group.dra
        ]
        if not slices:
            return
        resource = client.ResourceV1Api(self.api)
        for device_class in dra.device_classes():
            _created(lambda body=device_class: resource.create_device_class(body))
        for body in slices:
            _created(lambda body=body: resource.create_resource_slice(body))

    def _each(self, action: Callable[[Any], None], items: Iterable[Any]) -> None:
        """`action` on every item, in `workers` threads (in order in this one when 1); the
        first error is raised."""
        if self.workers <= 1:
            for item in items:
                action(item)
            return
        with ThreadPoolExecutor(self.workers) as pool:
            for _ in pool.map(action, items):
                pass

    def register_node(self, name: str) -> None:
        """Create the node (or find it), post its status and renew its Lease, as a kubelet
        does at start; a restarted kubelet (or a reset) posts its true status again."""
        try:
            unread(self.core.create_node(self.nodes[name], _preload_content=False))
        except ApiException as error:
            if error.status != 409:
                raise
        self.post_status(name)
        self._renew_lease(name)
        self.registered.add(name)

    def scenario_pods(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The scenario's pods by (namespace, name): bound ones on their nodes, pending ones
        for the scheduler."""
        pods: list[dict[str, Any]] = []
        for group in self.scenario.groups:
            if not group.ready:
                continue
            for index in range(group.count):
                node_name = node_object(group, index, "")["metadata"]["name"]
                for spec in group.pods:
                    for copy_index in range(spec.count):
                        name = f"{spec.name}-{node_name}" + (
                            f"-{copy_index}" if spec.count > 1 else ""
                        )
                        pods.append(pod_object(placed_pod(spec, group), name, node_name))
        for spec in self.scenario.pending:
            for index in range(spec.count):
                name = f"{spec.name}-{index}" if spec.count > 1 else spec.name
                pods.append(pod_object(spec, name, None))
        return {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}

    def seed_pods(self) -> None:
        self.create_missing_pods()
        self.pending_bound = self.pending_decided()
        self.ensure_owners()
        self.namespaces = {n.metadata.name for n in self.core.list_namespace().items}

    def create_missing_pods(self) -> int:
        present = {
            (p.metadata.namespace, p.metadata.name)
            for p in self.core.list_pod_for_all_namespaces().items
        }
        missing = [pod for key, pod in self.scenario_pods().items() if key not in present]
        # The bound pods first, then the pending ones one at a time in the scenario's order:
        # a pending pod created while its neighbours' bound pods are still missing finds
        # their room free, and the scheduler's queue takes pods in the order they came.
        bound = [p for p in missing if p["spec"].get("nodeName")]
        pending = [p for p in missing if not p["spec"].get("nodeName")]
        if self.workers > 1:
            # Each namespace once, before its pods: in threads, a pod may not wait on it.
            for namespace in sorted({p["metadata"]["namespace"] for p in bound}):
                self.ensure_namespace(namespace)
            self._each(self._create_pod_in_namespace, bound)
        else:
            for pod in bound:
                self._create_pod(pod)
        for pod in pending:
            self._create_pod(pod)
        return len(missing)

    def pending_decided(self, timeout: float | None = None) -> set[tuple[str, str]]:
        """The scenario's pending pods the scheduler bound, once it has decided on each
        (bound, or marked unschedulable): which of them a real scheduler places depends on
        the cluster, so a reset compares against what it placed after the seeding."""
        keys = {k for k, p in self.scenario_pods().items() if not p["spec"].get("nodeName")}
        deadline = time.monotonic() + (timeout or max(60.0, len(keys) / 10))
        while True:
            pods = {
                (p.metadata.namespace, p.metadata.name): p
                for namespace in sorted({k[0] for k in keys})
                for p in self.core.list_namespaced_pod(namespace).items
            }
            undecided = [k for k in keys if k not in pods or not _decided(pods[k])]
            if not undecided:
                return {k for k in keys if pods[k].spec.node_name}
            if time.monotonic() > deadline:
                raise TimeoutError(f"the scheduler has not decided on {sorted(undecided)[:5]}")
            time.sleep(0.1)

    def ensure_owners(
        self, timeout: float | None = None, existing: Collection[owners.OwnerKey] = ()
    ) -> int:
        """The scenario's owners (`kubesim.kubelet.owners`), created where missing (those in
        `existing` are known to be there); returns once their controllers have adopted every
        scenario pod. The controllers adopt a pod a PATCH, at their client's rate (20 a
        second by default): the default timeout grows with the pods past a minute."""
        apis = {"apps": client.AppsV1Api(self.api), "batch": client.BatchV1Api(self.api)}
        wanted = self.scenario_pods()
        if timeout is None:
            timeout = max(60.0, len(wanted) / 10)
        created = 0
        for key, pods in owners.owners_of(wanted).items():
            if key in existing:
                continue
            group, body = owners.owner_object(key, pods)
            create = (
                apis["apps"].create_namespaced_replica_set
                if group == "apps"
                else apis["batch"].create_namespaced_job
            )
            try:
                create(key[0], body)
                created += 1
            except ApiException as error:
                if error.status != 409:
                    raise
        deadline = time.monotonic() + timeout
        while not self._adopted(wanted):
            if time.monotonic() > deadline:
                raise TimeoutError("the scenario's owners did not adopt their pods in time")
            time.sleep(0.2)
        return created

    def _adopted(self, wanted: dict[tuple[str, str], dict[str, Any]]) -> bool:
        # Plain JSON: the client's models cost seconds of CPU a list at tens of thousands of
        # pods, and this list is read five times a second.
        listed = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False).data)
        owned = {
            (p["metadata"]["namespace"], p["metadata"]["name"])
            for p in listed["items"]
            if any(o.get("controller") for o in p["metadata"].get("ownerReferences") or [])
        }
        return all(
            key in owned for key, pod in wanted.items() if pod["metadata"].get("ownerReferences")
        )

    def _create_pod(self, pod: dict[str, Any]) -> None:
        self.ensure_namespace(pod["metadata"]["namespace"])
        self._create_pod_in_namespace(pod)

    def _create_pod_in_namespace(self, pod: dict[str, Any]) -> None:
        pod = owners.orphan(pod)  # its owner adopts it once the owner exists
        namespace = pod["metadata"]["namespace"]
        try:
            unread(self.core.create_namespaced_pod(namespace, pod, _preload_content=False))
        except ApiException as error:
            if error.status != 409:
                raise

    def ensure_namespace(self, namespace: str) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": namespace}})
        except ApiException as error:
            if error.status != 409:
                raise

    # -- heartbeats ---------------------------------------------------------------------

    def post_status(self, name: str, *, full: bool = True) -> None:
        """The node's status: whole when it registers (or is reset), its conditions alone on
        a heartbeat, so what someone else wrote of the status (a test acting as an admin
        reserving resources) is not put back."""
        status = self.nodes[name]["status"]
        stamp = now_rfc3339()
        for condition in status["conditions"]:
            condition["lastHeartbeatTime"] = stamp
            condition.setdefault("lastTransitionTime", stamp)
        if name in self.lost:
            return
        body = status if full else {"conditions": status["conditions"]}
        unread(self.core.patch_node_status(name, {"status": body}, _preload_content=False))

    def _renew_lease(self, name: str) -> None:
        if name in self.lost:
            return
        body = {
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": self.heartbeats.lease_duration_seconds,
                "renewTime": now_micro(),
            },
        }
        try:
            # A patch, not a replace: a Lease's update must carry its resourceVersion.
            unread(
                self.leases.patch_namespaced_lease(
                    name, "kube-node-lease", {"spec": body["spec"]}, _preload_content=False
                )
            )
        except ApiException as error:
            if error.status != 404:
                raise
            unread(
                self.leases.create_namespaced_lease("kube-node-lease", body, _preload_content=False)
            )

    def heartbeat_forever(self) -> None:
        """A round every `lease_renew_seconds`, each node's renewal at its own point of the
        round, as kubelets on their own machines renew at unrelated times: one burst of
        thousands of renewals would queue behind itself and reach the last nodes late. A
        round that cannot keep up runs its late renewals at once and says so."""
        every = self.heartbeats.lease_renew_seconds
        last_status = time.monotonic()
        round_start = time.monotonic() + every
        while not self.stop.wait(max(0.0, round_start - time.monotonic())):
            post_status = time.monotonic() - last_status >= self.heartbeats.status_seconds
            names = [name for name in self.nodes if name in self.registered]
            for index, name in enumerate(names):
                due = round_start + every * index / len(names)
                if self.stop.wait(max(0.0, due - time.monotonic())):
                    return
                try:
                    self._renew_lease(name)
                    if post_status:
                        self.post_status(name, full=False)
                except ApiException as error:
                    log.warning("heartbeat of %s: %s %s", name, error.status, error.reason)
            if post_status:
                last_status = time.monotonic()
            late = time.monotonic() - (round_start + every)
            if late > 0:
                log.warning("a round of %d heartbeats took %.1f s too long", len(names), late)
            round_start = max(round_start + every, time.monotonic())

    def lose(self, name: str) -> None:
        """The node's kubelet stops reporting (power, network, a kernel panic)."""
        self.lost.add(name)

    def recover(self, name: str) -> None:
        self.lost.discard(name)
        ready = next(c for c in self.nodes[name]["status"]["conditions"] if c["type"] == "Ready")
        ready.update(
            status="True", reason="KubeletReady", message="kubelet is posting ready status"
        )
        ready["lastTransitionTime"] = now_rfc3339()
        self.post_status(name)
        self._renew_lease(name)

    # -- pods ---------------------------------------------------------------------------

    def watch_forever(self, resource: str) -> None:
        """Keep the mirror (and the pods' lives) current from a watch, re-listing on any
        break as an informer does."""
        lister = {
            "pods": self.core.list_pod_for_all_namespaces,
            "nodes": self.core.list_node,
        }[resource]
        while not self.stop.is_set():
            try:
                listed = self.api.sanitize_for_serialization(lister())
                for item in listed["items"]:
                    self._seen(resource, "ADDED", item)
                stream = watch.Watch().stream(
                    lister,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=300,
                    allow_watch_bookmarks=True,
                )
                for event in stream:
                    if self.stop.is_set():
                        return
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._seen(resource, event["type"], event["raw_object"])
            except Exception as error:  # noqa: BLE001 - a broken watch is re-listed
                log.warning("watch of %s broke (%s); listing again", resource, error)
                self.stop.wait(1)

    def _seen(self, resource: str, type_: str, obj: dict[str, Any]) -> None:
        if resource == "nodes":
            name = obj["metadata"]["name"]
            if name in self.nodes:
                self.mirror.node_changed(None if type_ == "DELETED" else obj, name)
            return
        node = (obj.get("spec") or {}).get("nodeName")
        if node not in self.nodes:
            return
        self.mirror.pod_changed(obj, type_ == "DELETED")
        if type_ == "DELETED":
            self._forget(obj["metadata"]["uid"])
        else:
            self._sync_pod(obj)

    def _forget(self, uid: str) -> None:
        """A pod gone from the API server (force-deleted, or its deletion finished): as a
        kubelet, stop its containers and send nothing more about it. A pending end or
        deletion would only answer 404, or 409 to a pod of the same name made since."""
        with self._lock:
            self._timers = [t for t in self._timers if t[1] != uid]
        self._started.discard(uid)
        self._ending.discard(uid)

    def _sync_pod(self, pod: dict[str, Any]) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        uid = meta["uid"]
        if meta.get("deletionTimestamp"):
            if uid not in self._ending:
                self._ending.add(uid)
                # A workload that exits sooner on SIGTERM says so, as on kubesim's server.
                grace = int(meta.get("deletionGracePeriodSeconds") or 0)
                stops = Termination.stop_after(pod, grace)
                self.after(stops, uid, lambda: self._finish_deletion(pod))
            return
        if status.get("phase") in TERMINAL or uid in self._started:
            return
        if (meta.get("annotations") or {}).get(MANUAL_STATUS) == "manual":
            return
        if pod["spec"]["nodeName"] in self.lost:
            return  # a lost node's kubelet starts nothing
        self._started.add(uid)
        if self._starts is None:
            self._start(pod)
        else:
            self._starts.submit(self._start_or_retry, pod)

    def _start(self, pod: dict[str, Any]) -> None:
        """Post the pod's Running status, then schedule its end (never before its start)."""
        self._patch_status(pod, running_status(pod, self._node_ip(pod["spec"]["nodeName"])))
        seconds = (pod["metadata"].get("annotations") or {}).get(RUN_SECONDS)
        if seconds:
            self.after(float(seconds), pod["metadata"]["uid"], lambda: self._end(pod))
        deadline = enforced(pod)
        if deadline is not None:
            key = f"{pod['metadata']['uid']}/deadline"
            self.after(float(deadline), key, lambda: self._deadline(pod))

    def _start_or_retry(self, pod: dict[str, Any]) -> None:
        """_start in a worker thread: a failure there reaches no watch to re-list, so the pod
        is left unstarted for the next event or re-list to start again."""
        try:
            self._start(pod)
        except Exception as error:  # noqa: BLE001 - logged, and tried again on the next event
            log.warning(
                "start of %s failed (%s); trying again later", pod["metadata"]["name"], error
            )
            self._started.discard(pod["metadata"]["uid"])

    def _node_ip(self, name: str) -> str:
        addresses = self.nodes[name]["status"]["addresses"]
        return next(a["address"] for a in addresses if a["type"] == "InternalIP")

    def _patch_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        body = {"metadata": {"uid": meta["uid"]}, "status": status}
        try:
            unread(
                self.core.patch_namespaced_pod_status(
                    meta["name"], meta["namespace"], body, _preload_content=False
                )
            )
        except ApiException as error:
            if error.status not in (404, 409):
                log.warning("status of %s: %s %s", meta["name"], error.status, error.reason)

    def _end(self, pod: dict[str, Any]) -> None:
        reason = (pod["metadata"].get("annotations") or {}).get(EXIT_REASON) or "Completed"
        self._patch_status(pod, terminated_status(pod, reason, 0 if reason == "Completed" else 1))

    def _deadline(self, pod: dict[str, Any]) -> None:
        """The active deadline passed: fail the pod, as the kubelet does, unless it ended or
        is being deleted meanwhile (read back: this kubelet keeps no copy of later states)."""
        meta = pod["metadata"]
        try:
            now = self.core.read_namespaced_pod(meta["name"], meta["namespace"])
        except ApiException:
            return
        if now.metadata.uid != meta["uid"] or now.metadata.deletion_timestamp:
            return
        if now.status is None or now.status.phase != "Running":
            return
        running = self.core.api_client.sanitize_for_serialization(now.status)
        self._patch_status(pod, deadline_exceeded(running, now_rfc3339()))

    def _finish_deletion(self, pod: dict[str, Any]) -> None:
        """What the kubelet does once the containers are gone: the final status, then the
        DELETE with grace 0 and the pod's UID as precondition (finalizers still hold it)."""
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("phase") not in TERMINAL:
            code = 0 if pod["spec"].get("restartPolicy") == "Never" else 137
            self._patch_status(
                pod, terminated_status(pod, "Completed" if not code else "Error", code)
            )
        try:
            # With a body, the API server reads the options from it alone (query parameters
            # are ignored): the grace period goes in the body, beside the precondition.
            self.core.delete_namespaced_pod(
                meta["name"],
                meta["namespace"],
                body={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
            )
        except ApiException as error:
            if error.status not in (404, 409):
                log.warning("deleting %s: %s %s", meta["name"], error.status, error.reason)

    # -- timers -------------------------------------------------------------------------

    def after(self, seconds: float, key: str, action: Callable[[], None]) -> None:
        with self._lock:
            self._timers.append((time.monotonic() + seconds, key, action))

    def advance(self, seconds: float) -> int:
        """Run the kubelets' clock ahead (grace periods, pods' run times), as kubesim's own
        server's `POST /kubesim/clock` does: the deadlines are the kubelet's, not the API
        server's. The number of timers now due."""
        with self._lock:
            self._timers = [(due - seconds, key, action) for due, key, action in self._timers]
            now = time.monotonic()
            return sum(1 for due, _, _ in self._timers if due <= now)

    def timers_forever(self) -> None:
        while not self.stop.wait(0.2):
            now = time.monotonic()
            with self._lock:
                due = [t for t in self._timers if t[0] <= now]
                self._timers = [t for t in self._timers if t[0] > now]
            for _, key, action in due:
                try:
                    action()
                except Exception:
                    log.exception("kubelet action for %s failed", key)

    def start_heartbeats(self) -> threading.Thread:
        """The heartbeats' thread, started once (before `register` when registering takes
        longer than the controllers' grace: the first nodes would be lost meanwhile)."""
        if self._heartbeats is None:
            self._heartbeats = threading.Thread(target=self.heartbeat_forever, daemon=True)
            self._heartbeats.start()
        return self._heartbeats

    def run(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self.watch_forever, args=("nodes",), daemon=True),
            threading.Thread(target=self.watch_forever, args=("pods",), daemon=True),
            threading.Thread(target=self.timers_forever, daemon=True),
        ]
        for thread in threads:
            thread.start()
        return [*threads[:2], self.start_heartbeats(), threads[2]]


def running_status(pod: dict[str, Any], host_ip: str) -> dict[str, Any]:
    stamp = now_rfc3339()
    containers = pod["spec"].get("containers") or []
    pod_ip = addresses.pod_ip(pod)  # the address kubesim's own API server gives the pod
    return {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": stamp}
            for t in (
                "PodReadyToStartContainers",
                "Initialized",
                "ContainersReady",
                "Ready",
                "PodScheduled",  # the kubelet adds it to a pod bound without the scheduler
            )
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": stamp,
        "qosClass": qos_class(pod),
        "containerStatuses": [
            {
                "name": c["name"],
                "ready": True,
                "restartCount": 0,
                "image": c.get("image", ""),
                "imageID": "",
                "containerID": f"containerd://{pod['metadata']['uid'].replace('-', '')}{i}",
                "started": True,
                "state": {"running": {"startedAt": stamp}},
            }
            for i, c in enumerate(containers)
        ],
    }


def terminated_status(pod: dict[str, Any], reason: str, exit_code: int) -> dict[str, Any]:
    stamp = now_rfc3339()
    phase = "Succeeded" if exit_code == 0 else "Failed"
    return {
        "phase": phase,
        "conditions": [
            {"type": t, "status": "False", "lastTransitionTime": stamp, "reason": "PodCompleted"}
            for t in ("Ready", "ContainersReady")
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "ready": False,
                "restartCount": 0,
                "image": c.get("image", ""),
                "imageID": "",
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason,
                        "finishedAt": stamp,
                    }
                },
            }
            for c in pod["spec"].get("containers") or []
        ],
    }


def _decided(pod: Any) -> bool:
    """Bound, or found unschedulable by the scheduler."""
    return bool(pod.spec.node_name) or any(
        c.type == "PodScheduled" and c.status == "False"
        for c in (pod.status.conditions if pod.status else None) or []
    )
