"""DaemonSets (apps/v1) and the controller that keeps one of their pods on every GPU node:
the NVIDIA device plugin and dcgm-exporter, as the GPU operator deploys them.

The controller does what `pkg/controller/daemon` does for these two: a pod for each node
the DaemonSet should run on (its node selector matches, its tolerations cover the node's
NoSchedule and NoExecute taints), owned by the DaemonSet (`controller: true`), pinned to
its node with a `metadata.name` node-affinity term, carrying the tolerations the controller
adds to every daemon pod; a deleted daemon pod is replaced; the status counts are kept.

Every daemon pod of a DaemonSet shares its unchanging parts (containers, tolerations,
conditions) with the others: stored objects are never mutated, and 15,000 nodes make
30,000 daemon pods.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim import scheduling
from kubesim.addresses import node_ip, pod_ip
from kubesim.admission import admit_pod
from kubesim.errors import ApiError
from kubesim.store import Entry

if TYPE_CHECKING:
    from kubesim.cluster_view import ClusterView

NAMESPACE = "gpu-operator"
EXPORTER = "nvidia-dcgm-exporter"
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
# GPU feature discovery's label on every GPU node (the operator deploys its operands there).
NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
# The pool taints are NoSchedule taints of the cluster's own: the operator's daemon sets are
# configured to tolerate them, or a tainted GPU node would have no device plugin.
TEMPLATE_TOLERATIONS: list[dict[str, Any]] = [{"operator": "Exists", "effect": "NoSchedule"}]
# What the DaemonSet controller adds to every daemon pod (AddOrUpdateDaemonPodTolerations).
DAEMON_TOLERATIONS: list[dict[str, Any]] = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
# The alphabet of generated name suffixes (apimachinery's rand.String: no vowels, no 0/1/3).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def name_suffix(seed: str) -> str:
    """Five characters as a generateName suffix, the same for the same seed."""
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big")
    chars = []
    for _ in range(5):
        number, index = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[index])
    return "".join(chars)


@dataclass(frozen=True)
class Operand:
    name: str
    container: str
    image: str


OPERANDS = (
    Operand(DEVICE_PLUGIN, "nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
    Operand(
        EXPORTER, "nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.1-ubuntu22.04"
    ),
)


def _template(operand: Operand) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": operand.name}},
        "spec": {
            "containers": [
                {
                    "name": operand.container,
                    "image": operand.image,
                    "imagePullPolicy": "IfNotPresent",
                    "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ],
            "nodeSelector": dict(NODE_SELECTOR),
            "tolerations": [dict(t) for t in TEMPLATE_TOLERATIONS],
            "priorityClassName": "system-node-critical",
            "serviceAccountName": operand.name,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "securityContext": {},
        },
    }


def daemonset_object(operand: Operand, created: str) -> dict[str, Any]:
    return {
        "kind": "DaemonSet",
        "apiVersion": "apps/v1",
        "metadata": {
            "name": operand.name,
            "namespace": NAMESPACE,
            "labels": {"app": operand.name, "app.kubernetes.io/managed-by": "gpu-operator"},
            "annotations": {"deprecated.daemonset.template.generation": "1"},
            "generation": 1,
            "creationTimestamp": created,
        },
        "spec": {
            "selector": {"matchLabels": {"app": operand.name}},
            "template": _template(operand),
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "revisionHistoryLimit": 10,
        },
        "status": {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
            "observedGeneration": 1,
        },
    }


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("controller"):
            return dict(owner)
    return None


def _node_ready(node: dict[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


class _Shared:
    """The parts every daemon pod of one DaemonSet has in common, built once."""

    def __init__(self, ds: dict[str, Any], created: str) -> None:
        meta, template = ds["metadata"], ds["spec"]["template"]
        self.name = meta["name"]
        self.uid = meta["uid"]
        revision = name_suffix(f"{self.name}/revision") + name_suffix(self.name)
        self.labels = {
            **template["metadata"]["labels"],
            "controller-revision-hash": revision,
            "pod-template-generation": "1",
        }
        self.owners = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": self.name,
                "uid": self.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        spec = template["spec"]
        self.spec = {k: v for k, v in spec.items() if k != "tolerations"}
        self.tolerations = [*spec.get("tolerations", []), *DAEMON_TOLERATIONS]
        self.statuses = {
            ready: [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": ready,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": created}},
                }
                for c in spec["containers"]
            ]
            for ready in (True, False)
        }
        self.conditions = {
            ready: [
                {"type": kind, "status": "True", "lastTransitionTime": created}
                for kind in ("PodReadyToStartContainers", "Initialized")
            ]
            + [
                {
                    "type": kind,
                    "status": "True" if ready else "False",
                    "lastTransitionTime": created,
                }
                for kind in ("Ready", "ContainersReady")
            ]
            + [{"type": "PodScheduled", "status": "True", "lastTransitionTime": created}]
            for ready in (True, False)
        }


class DaemonSetController:
    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self._shared: dict[str, _Shared] = {}  # by DaemonSet uid
        # (DaemonSet uid, node) -> its daemon pod's name; and per DaemonSet uid the names of
        # its ready pods (what the status counts).
        self._placed: dict[tuple[str, str], str] = {}
        self._ready: dict[str, set[str]] = {}
        # (DaemonSet uid, node) -> how many of its pods there were gone (a replacement gets
        # a new name: a generated name is not reused).
        self._gone: dict[tuple[str, str], int] = {}

    @classmethod
    def install(cls, cluster: ClusterView) -> DaemonSetController:
        """Create the GPU operator's DaemonSets and keep their pods from now on (the caller
        hands the controller to the cluster: `Cluster.daemonsets`)."""
        controller = cls(cluster)
        created = cluster.store.clock.rfc3339()
        for operand in OPERANDS:
            entry = cluster.store.create("daemonsets", daemonset_object(operand, created))
            uid = entry.obj["metadata"]["uid"]
            controller._shared[uid] = _Shared(entry.obj, created)
            controller._ready[uid] = set()
        cluster.store.listeners.append(controller._observe)
        for node in cluster.store.list("nodes", None)[1]:
            controller._place(node.obj)
        return controller

    # --- which nodes ---
    def should_run(self, node: dict[str, Any]) -> bool:
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in NODE_SELECTOR.items()):
            return False
        tolerations = [*TEMPLATE_TOLERATIONS, *DAEMON_TOLERATIONS]
        return all(
            scheduling.tolerates(tolerations, taint)
            for taint in (node.get("spec") or {}).get("taints") or []
            if taint.get("effect") in ("NoSchedule", "NoExecute")
        )

    def pod_name(self, node: str, daemonset: str) -> str | None:
        """The name of `daemonset`'s pod on `node`, if it has one."""
        uid = next((u for u, s in self._shared.items() if s.name == daemonset), "")
        return self._placed.get((uid, node))

    # --- keeping the pods ---
    def _observe(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        if resource == "nodes" and type_ != "DELETED":
            self._place(new.obj)
        elif resource == "pods":
            self._count(type_, new.obj)

    def _place(self, node: dict[str, Any]) -> None:
        if not self.should_run(node):
            return
        name = node["metadata"]["name"]
        for uid, shared in self._shared.items():
            if (uid, name) not in self._placed:
                self.store.create("pods", self._daemon_pod(shared, node))

    def _count(self, type_: str, pod: dict[str, Any]) -> None:
        owner = controller_of(pod)
        if owner is None or owner.get("uid") not in self._shared:
            return
        uid, meta = owner["uid"], pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName") or ""
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
        if type_ == "DELETED":
            if self._placed.get((uid, node)) == meta["name"]:
                del self._placed[(uid, node)]
                self._gone[(uid, node)] = self._gone.get((uid, node), 0) + 1
            self._ready[uid].discard(meta["name"])
            nodes = self.store.objects["nodes"]
            if node in nodes:
                self._place(nodes[node].obj)  # a deleted daemon pod is replaced
            return
        # One daemon pod a node: the controller keeps the first and counts no other.
        if self._placed.setdefault((uid, node), meta["name"]) != meta["name"]:
            return
        if ready and not meta.get("deletionTimestamp"):
            self._ready[uid].add(meta["name"])
        else:
            self._ready[uid].discard(meta["name"])

    def _daemon_pod(self, shared: _Shared, node: dict[str, Any]) -> dict[str, Any]:
        node_name = node["metadata"]["name"]
        seed = f"{shared.name}/{node_name}/{self._gone.get((shared.uid, node_name), 0)}"
        name = f"{shared.name}-{name_suffix(seed)}"
        attempt = 0
        # Five generated characters collide now and then among 15,000 nodes: the real
        # controller meets AlreadyExists and tries another name, as this does.
        while f"{NAMESPACE}/{name}" in self.store.objects["pods"]:
            attempt += 1
            name = f"{shared.name}-{name_suffix(f'{seed}/{attempt}')}"
        ready = _node_ready(node)
        now = self.store.clock.rfc3339()
        pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "generateName": f"{shared.name}-",
                "namespace": NAMESPACE,
                "labels": shared.labels,
                "ownerReferences": shared.owners,
            },
            "spec": {
                **shared.spec,
                "tolerations": shared.tolerations,
                "nodeName": node_name,
                # The controller pins its pod with node affinity; the scheduler binds it.
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": [node_name],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
            },
            "status": {
                "phase": "Running",
                "conditions": shared.conditions[ready],
                "hostIP": node_ip(self.store, node_name),
                "startTime": now,
                "qosClass": "BestEffort",
                "containerStatuses": shared.statuses[ready],
            },
        }
        pod["status"]["podIP"] = pod_ip(pod)
        admit_pod(pod)  # what the API server fills in on the controller's create
        return pod

    # --- status ---
    def sync_status(self) -> None:
        """Write each DaemonSet's counts into its status, as the controller does; called
        before a read, so a client never sees stale counts."""
        with self.store.lock:
            desired = sum(1 for n in self.store.list("nodes", None)[1] if self.should_run(n.obj))
            for uid, shared in self._shared.items():
                try:
                    entry = self.store.get("daemonsets", NAMESPACE, shared.name)
                except ApiError:
                    continue  # deleted by a client: nothing to keep
                current = sum(1 for (owner, _) in self._placed if owner == uid)
                ready = len(self._ready[uid])
                status = {
                    "currentNumberScheduled": current,
                    "numberMisscheduled": 0,
                    "desiredNumberScheduled": desired,
                    "numberReady": ready,
                    "observedGeneration": 1,
                    "updatedNumberScheduled": current,
                    "numberAvailable": ready,
                }
                if current - ready > 0:
                    status["numberUnavailable"] = current - ready
                if entry.obj.get("status") != status:
                    self.store.replace(
                        "daemonsets", {**entry.obj, "status": status}, expected_rv=None
                    )


# --- `kubectl get daemonsets`: the API server's Table ---


def _column(
    name: str, type_: str, description: str, priority: int = 0, fmt: str = ""
) -> dict[str, Any]:
    return {
        "name": name,
        "type": type_,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


DAEMONSET_COLUMNS = [
    _column("Name", "string", "Name must be unique within a namespace.", 0, "name"),
    _column("Desired", "integer", "The number of nodes that should run the daemon pod."),
    _column("Current", "integer", "The number of nodes running a daemon pod that should."),
    _column("Ready", "integer", "The number of nodes that should run the pod and have it ready."),
    _column("Up-to-date", "integer", "The number of nodes running the updated daemon pod."),
    _column("Available", "integer", "The number of nodes whose daemon pod is available."),
    _column("Node Selector", "string", "A selector which must match a node for the pod to fit."),
    _column("Age", "string", "The time since the object was created."),
    _column("Containers", "string", "Names of each container in the template.", 1),
    _column("Images", "string", "Images referenced by each container in the template.", 1),
    _column("Selector", "string", "A label query over the pods the daemon set manages.", 1),
]


def _labels_text(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


def daemonset_cells(ds: dict[str, Any], age: Any) -> list[Any]:
    status = ds.get("status") or {}
    template = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = template.get("containers") or []
    selector = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return [
        ds["metadata"]["name"],
        status.get("desiredNumberScheduled", 0),
        status.get("currentNumberScheduled", 0),
        status.get("numberReady", 0),
        status.get("updatedNumberScheduled", 0),
        status.get("numberAvailable", 0),
        _labels_text(template.get("nodeSelector") or {}),
        age(ds["metadata"].get("creationTimestamp")),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        _labels_text(selector),
    ]
