"""Scenario files: node groups and their pods, checked with the file, line and reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesim import mig, sharing
from kubesim.mig_manager import GpuShape
from kubesim.scheduling import is_extended
from kubesim.validation import TAINT_EFFECTS, label_value_problems, qualified_name_problems

SCENARIO_DIR = Path(__file__).parent / "scenarios"
LOADS = ("training", "inference", "idle")


class ScenarioError(Exception):
    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")


@dataclass
class PodSpec:
    name: str
    namespace: str
    gpus: int
    load: str
    owner: str
    count: int = 1  # per node for node pods; total for pending pods
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_pool: list[str] = field(default_factory=list)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    # Other extended resources it asks for besides `gpus` (nvidia.com/mig-1g.10gb: 1)
    resources: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # besides app: <name>
    annotations: dict[str, str] = field(default_factory=dict)  # besides kubesim.io/load

    def asks(self) -> dict[str, int]:
        """Every extended resource the pod asks for."""
        return {**({mig.GPU_RESOURCE: self.gpus} if self.gpus else {}), **self.resources}


@dataclass
class NodeGroup:
    name: str
    count: int
    prefix: str
    gpu_model: str
    gpus: int
    gpu_memory: int
    family: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    ready: bool
    unschedulable: bool
    pods: list[PodSpec]
    cpu: str = "96"
    memory: str = "1056Gi"
    # What the kubelet advertises as allocatable; None: the capacity (nothing reserved for
    # the system daemons, as a kubelet without systemReserved/kubeReserved reports).
    allocatable_cpu: str | None = None
    allocatable_memory: str | None = None
    mig: mig.MigLayout | None = None  # every GPU split into equal MIG instances
    driver: str = "550.54.15"  # the NVIDIA driver (GPU feature discovery's cuda.driver labels)
    sharing: sharing.Sharing | None = None  # every GPU shared by time-slicing or MPS
    dra: bool = False  # the GPUs are DRA devices (kubesim.dra), not the device plugin's

    def resource_slice(self, node: str) -> dict[str, Any]:
        """The ResourceSlice NVIDIA's DRA driver publishes for one of the group's nodes."""
        from kubesim import dra

        return dra.resource_slice(
            node,
            model=self.gpu_model,
            gpus=self.gpus,
            memory_mib=self.gpu_memory,
            family=self.family,
            driver=self.driver,
        )

    @property
    def shape(self) -> GpuShape:
        return GpuShape(self.gpu_model, self.gpus, self.gpu_memory, self.mig, self.sharing)


@dataclass
class Scenario:
    name: str
    groups: list[NodeGroup]
    pending: list[PodSpec]


GROUP_FIELDS = {
    *("name", "count", "prefix", "gpu", "labels", "taints", "ready", "unschedulable"),
    *("pods", "cpu", "memory", "allocatable"),
}
GPU_FIELDS = {
    *("model", "count", "memoryMiB", "family", "mig", "migStrategy", "sharing", "driver"),
    "dra",
}


class _Reader:
    """Walks a composed YAML tree, so each problem can name its line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, node: yaml.Node, reason: str) -> ScenarioError:
        return ScenarioError(self.path, node.start_mark.line + 1, reason)

    def mapping(self, node: yaml.Node, what: str, allowed: set[str]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping")
        result = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if key not in allowed:
                raise self.fail(
                    key_node,
                    f"unknown field {key!r} in {what} (allowed: {', '.join(sorted(allowed))})",
                )
            result[key] = value_node
        return result

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, f"{what} must be a list")
        return list(node.value)

    def string(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{what} must be a string")
        return str(node.value)

    def integer(self, node: yaml.Node, what: str, minimum: int = 0) -> int:
        try:
            value = int(self.string(node, what))
        except ValueError:
            raise self.fail(node, f"{what} must be a whole number, got {node.value!r}") from None
        if value < minimum:
            raise self.fail(node, f"{what} must be at least {minimum}, got {value}")
        return value

    def boolean(self, node: yaml.Node, what: str) -> bool:
        value = self.string(node, what).lower()
        if value not in ("true", "false"):
            raise self.fail(node, f"{what} must be true or false, got {node.value!r}")
        return value == "true"

    def labels(self, node: yaml.Node, what: str) -> dict[str, str]:
        result = {}
        for key_node, value_node in self.mapping_any(node, what):
            key, value = key_node.value, self.string(value_node, f"{what}.{key_node.value}")
            problems = qualified_name_problems(key)
            if problems:
                raise self.fail(key_node, f"invalid label key {key!r}: {problems[0]}")
            problems = label_value_problems(value)
            if problems:
                raise self.fail(value_node, f"invalid label value {value!r}: {problems[0]}")
            result[key] = value
        return result

    def mapping_any(self, node: yaml.Node, what: str) -> list[tuple[yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping")
        return list(node.value)

    def taints(self, node: yaml.Node) -> list[dict[str, str]]:
        result = []
        for item in self.sequence(node, "taints"):
            fields = self.mapping(item, "taint", {"key", "value", "effect"})
            if "key" not in fields or "effect" not in fields:
                raise self.fail(item, "a taint needs key and effect")
            taint = {k: self.string(v, f"taint.{k}") for k, v in fields.items()}
            if taint["effect"] not in TAINT_EFFECTS:
                raise self.fail(
                    fields["effect"],
                    f"taint effect must be one of "
                    f"{', '.join(TAINT_EFFECTS)}, got {taint['effect']!r}",
                )
            result.append(taint)
        return result

    def pod(self, node: yaml.Node, *, pending: bool) -> PodSpec:
        allowed = {
            "name",
            "namespace",
            "gpus",
            "load",
            "owner",
            "count",
            "nodeSelector",
            "affinityPool",
            "tolerate",
            "resources",
            "labels",
            "annotations",
        }
        f = self.mapping(node, "pod", allowed)
        if "name" not in f:
            raise self.fail(node, "a pod needs a name")
        load = self.string(f["load"], "load") if "load" in f else "inference"
        if load not in LOADS:
            raise self.fail(f["load"], f"load must be one of {', '.join(LOADS)}, got {load!r}")
        return PodSpec(
            name=self.string(f["name"], "name"),
            namespace=self.string(f["namespace"], "namespace") if "namespace" in f else "default",
            # A pod that names its resources asks for no nvidia.com/gpu unless it says so.
            gpus=self.integer(f["gpus"], "gpus") if "gpus" in f else (0 if "resources" in f else 1),
            load=load,
            owner=self.string(f["owner"], "owner") if "owner" in f else "Job",
            count=self.integer(f["count"], "count", 1) if "count" in f else 1,
            node_selector=self.labels(f["nodeSelector"], "nodeSelector")
            if "nodeSelector" in f
            else {},
            affinity_pool=[
                self.string(v, "affinityPool")
                for v in self.sequence(f["affinityPool"], "affinityPool")
            ]
            if "affinityPool" in f
            else [],
            tolerations=[
                {"key": self.string(v, "tolerate"), "operator": "Exists", "effect": "NoSchedule"}
                for v in self.sequence(f["tolerate"], "tolerate")
            ]
            if "tolerate" in f
            else [],
            resources=self.resources(f["resources"]) if "resources" in f else {},
            labels=self.labels(f["labels"], "labels") if "labels" in f else {},
            annotations=self.annotations(f["annotations"]) if "annotations" in f else {},
        )

    def annotations(self, node: yaml.Node) -> dict[str, str]:
        result = {}
        for key_node, value_node in self.mapping_any(node, "annotations"):
            key = self.string(key_node, "annotations")
            if problems := qualified_name_problems(key):
                raise self.fail(key_node, f"invalid annotation key {key!r}: {problems[0]}")
            result[key] = self.string(value_node, f"annotations.{key}")
        return result

    def resources(self, node: yaml.Node) -> dict[str, int]:
        """A pod's `resources`: extended resource name -> how many (its limit)."""
        result = {}
        for key_node, value_node in self.mapping_any(node, "resources"):
            name = self.string(key_node, "resources")
            if not is_extended(name) or qualified_name_problems(name):
                raise self.fail(
                    key_node, f"resources: {name!r} is no extended resource (nvidia.com/...)"
                )
            result[name] = self.integer(value_node, f"resources.{name}", 1)
        return result

    def group(self, node: yaml.Node) -> NodeGroup:
        f = self.mapping(node, "node group", GROUP_FIELDS)
        allocatable_cpu, allocatable_memory = (
            self.allocatable(f["allocatable"]) if "allocatable" in f else (None, None)
        )
        for required in ("name", "count", "gpu"):
            if required not in f:
                raise self.fail(node, f"a node group needs {required!r}")
        gpu = self.mapping(f["gpu"], "gpu", GPU_FIELDS)
        if "model" not in gpu:
            raise self.fail(f["gpu"], "gpu needs a model")
        layout, shared = self.gpu_shape(f["gpu"], gpu)
        through_dra = self.boolean(gpu["dra"], "gpu.dra") if "dra" in gpu else False
        if through_dra and (layout is not None or shared is not None):
            raise self.fail(gpu["dra"], "gpu.dra serves whole GPUs: no gpu.mig or gpu.sharing")
        name = self.string(f["name"], "name")
        return NodeGroup(
            name=name,
            count=self.integer(f["count"], "count"),
            prefix=self.string(f["prefix"], "prefix") if "prefix" in f else name,
            gpu_model=self.string(gpu["model"], "gpu.model"),
            gpus=self.integer(gpu["count"], "gpu.count") if "count" in gpu else 8,
            gpu_memory=self.integer(gpu["memoryMiB"], "gpu.memoryMiB", 1)
            if "memoryMiB" in gpu
            else 81920,
            family=self.string(gpu["family"], "gpu.family") if "family" in gpu else "ampere",
            labels=self.labels(f["labels"], "labels") if "labels" in f else {},
            taints=self.taints(f["taints"]) if "taints" in f else [],
            ready=self.boolean(f["ready"], "ready") if "ready" in f else True,
            unschedulable=self.boolean(f["unschedulable"], "unschedulable")
            if "unschedulable" in f
            else False,
            pods=[self.pod(p, pending=False) for p in self.sequence(f["pods"], "pods")]
            if "pods" in f
            else [],
            cpu=self.string(f["cpu"], "cpu") if "cpu" in f else "96",
            memory=self.string(f["memory"], "memory") if "memory" in f else "1056Gi",
            allocatable_cpu=allocatable_cpu,
            allocatable_memory=allocatable_memory,
            mig=layout,
            driver=self.driver(gpu["driver"]) if "driver" in gpu else "550.54.15",
            sharing=shared,
            dra=through_dra,
        )

    def gpu_shape(
        self, node: yaml.Node, gpu: dict[str, yaml.Node]
    ) -> tuple[mig.MigLayout | None, sharing.Sharing | None]:
        """`gpu.mig` (with `gpu.migStrategy`) or `gpu.sharing`: what the GPU operator makes
        of the group's GPUs."""
        if "mig" in gpu and "sharing" in gpu:
            raise self.fail(node, "gpu.mig and gpu.sharing exclude each other")
        if "migStrategy" in gpu and "mig" not in gpu:
            raise self.fail(gpu["migStrategy"], "gpu.migStrategy needs gpu.mig")
        if "sharing" in gpu:
            return None, self.gpu_sharing(gpu["sharing"])
        if "mig" not in gpu:
            return None, None
        model = self.string(gpu["model"], "gpu.model")
        if not mig.is_capable(model):
            raise self.fail(gpu["mig"], f"gpu.mig: {model} is not MIG-capable")
        strategy = (
            self.string(gpu["migStrategy"], "gpu.migStrategy") if "migStrategy" in gpu else "single"
        )
        if strategy not in mig.STRATEGIES:
            raise self.fail(
                gpu["migStrategy"],
                f"gpu.migStrategy must be one of {', '.join(mig.STRATEGIES)}, got {strategy!r}",
            )
        return self.mig_layout(gpu, strategy), None

    def mig_layout(self, gpu: dict[str, yaml.Node], strategy: str) -> mig.MigLayout:
        """`gpu.mig`: the MIG profile every GPU of the group is split into."""
        profile = self.string(gpu["mig"], "gpu.mig")
        memory = self.integer(gpu["memoryMiB"], "gpu.memoryMiB", 1) if "memoryMiB" in gpu else 81920
        problem = mig.profile_problem(profile, memory)
        if problem:
            raise self.fail(gpu["mig"], problem)
        return mig.MigLayout(profile, strategy)

    def gpu_sharing(self, node: yaml.Node) -> sharing.Sharing:
        """`gpu.sharing`: {strategy: time-slicing | mps, replicas: N, rename: false}."""
        f = self.mapping(node, "gpu.sharing", {"strategy", "replicas", "rename"})
        if "strategy" not in f or "replicas" not in f:
            raise self.fail(node, "gpu.sharing needs strategy and replicas")
        strategy = self.string(f["strategy"], "gpu.sharing.strategy")
        problem = sharing.strategy_problem(strategy)
        if problem:
            raise self.fail(f["strategy"], problem)
        return sharing.Sharing(
            strategy,
            self.integer(f["replicas"], "gpu.sharing.replicas", sharing.MIN_REPLICAS),
            rename=self.boolean(f["rename"], "gpu.sharing.rename") if "rename" in f else False,
        )

    def allocatable(self, node: yaml.Node) -> tuple[str | None, str | None]:
        """A group's allocatable CPU and memory, each None when not given (the capacity)."""
        f = self.mapping(node, "allocatable", {"cpu", "memory"})
        return tuple(  # type: ignore[return-value]
            self.string(f[k], f"allocatable.{k}") if k in f else None for k in ("cpu", "memory")
        )

    def driver(self, node: yaml.Node) -> str:
        value = self.string(node, "gpu.driver")
        parts = value.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise self.fail(node, f"gpu.driver must be MAJOR.MINOR.REV, got {value!r}")
        return value


def load_scenario(name_or_path: str, _extending: tuple[Path, ...] = ()) -> Scenario:
    path = Path(name_or_path)
    if not path.suffix:
        path = SCENARIO_DIR / f"{name_or_path}.yaml"
    if path.resolve() in _extending:
        chain = " -> ".join(str(p) for p in (*_extending, path.resolve()))
        raise ScenarioError(str(path), 0, f"extends itself: {chain}")
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(str(path), 0, f"cannot read: {exc.strerror}") from None
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ScenarioError(
            str(path),
            (mark.line + 1) if mark else 0,
            f"not valid YAML: {getattr(exc, 'problem', exc)}",
        ) from None
    reader = _Reader(str(path))
    if root is None:
        raise ScenarioError(str(path), 1, "the file is empty")
    top = reader.mapping(root, "scenario", {"name", "extends", "nodes", "pendingPods"})
    if "nodes" not in top:
        raise reader.fail(root, "a scenario needs 'nodes'")
    # `extends: <scenario>`: its node groups and pending pods first, then this file's.
    base = None
    if "extends" in top:
        base = load_scenario(
            reader.string(top["extends"], "extends"), (*_extending, path.resolve())
        )
    groups = [
        *(base.groups if base else []),
        *(reader.group(g) for g in reader.sequence(top["nodes"], "nodes")),
    ]
    seen: dict[str, int] = {}
    for g in groups:
        if g.prefix in seen:
            raise ScenarioError(str(path), 0, f"two node groups use the prefix {g.prefix!r}")
        seen[g.prefix] = 1
        _check_room(str(path), g)
    pending = [*(base.pending if base else [])]
    if "pendingPods" in top:
        pending += [
            reader.pod(p, pending=True) for p in reader.sequence(top["pendingPods"], "pendingPods")
        ]
    name = reader.string(top["name"], "name") if "name" in top else path.stem
    return Scenario(name, groups, pending)


def _check_room(path: str, group: NodeGroup) -> None:
    """The group's pods must fit on each of its nodes, resource by resource."""
    has = group.shape.resources()
    used: dict[str, int] = {}
    for pod in group.pods:
        for name, count in pod.asks().items():
            used[name] = used.get(name, 0) + count * pod.count
    for name, count in used.items():
        if count > has.get(name, 0):
            what = "GPUs" if name == mig.GPU_RESOURCE else name
            raise ScenarioError(
                path,
                0,
                f"node group {group.name!r}: its pods ask for {count} "
                f"{what} per node but a node has {has.get(name, 0)}",
            )


POOL_TAINTS = {"training": True, "inference": True}


def generated_scenario(nodes: int, gpus_per_node: int = 8) -> Scenario:
    """N nodes for benchmarks: 40 % training, 30 % inference, 20 % mixed, 10 % unassigned,
    each with pods holding most of its GPUs (8 one-GPU pods a node at 8 GPUs)."""
    shares = [("training", 0.4), ("inference", 0.3), ("mixed", 0.2), (None, 0.1)]
    groups, assigned = [], 0
    for index, (pool, share) in enumerate(shares):
        count = nodes - assigned if index == len(shares) - 1 else int(nodes * share)
        assigned += count
        labels = {"gpu-pool": pool, "workload-type": pool} if pool else {}
        if pool == "training":
            labels["batch-scheduling"] = "enabled"
        taints = (
            [{"key": f"workload-{pool}", "value": "true", "effect": "NoSchedule"}]
            if pool in POOL_TAINTS
            else []
        )
        load = "training" if pool == "training" else "inference"
        pods = (
            [
                PodSpec(
                    name=f"{pool or 'batch'}-worker",
                    namespace=f"team-{pool or 'misc'}",
                    gpus=1,
                    load=load,
                    owner="Job",
                    count=gpus_per_node,
                )
            ]
            if pool
            else [
                PodSpec(
                    name="batch-worker",
                    namespace="team-misc",
                    gpus=1,
                    load="idle",
                    owner="Job",
                    count=gpus_per_node // 2,
                )
            ]
        )
        groups.append(
            NodeGroup(
                name=pool or "unassigned",
                count=count,
                prefix=f"gpu-{pool or 'new'}",
                gpu_model="NVIDIA-A100-SXM4-80GB",
                gpus=gpus_per_node,
                gpu_memory=81920,
                family="ampere",
                labels=labels,
                taints=taints,
                ready=True,
                unschedulable=False,
                pods=pods,
            )
        )
    return Scenario(f"generated-{nodes}", groups, [])


# --- building API objects from a scenario ---


def driver_labels(driver: str) -> dict[str, str]:
    """GPU feature discovery's driver labels for a driver version MAJOR.MINOR.REV."""
    major, minor, rev = driver.split(".")
    return {
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
    }


def node_object(group: NodeGroup, index: int, created: str) -> dict[str, Any]:
    name = f"{group.prefix}-{index:03d}" if group.count < 1000 else f"{group.prefix}-{index:05d}"
    # A node that is not ready gets its taints from the node lifecycle controller.
    taints = [dict(t) for t in group.taints]
    octet = index % 250 + 1
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "labels": node_labels(group, name),
            "creationTimestamp": created,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "podCIDR": f"10.244.{octet}.0/24",
            "podCIDRs": [f"10.244.{octet}.0/24"],
            # Empty lists are not served (omitempty): an untainted node has no taints field.
            **({"taints": taints} if taints else {}),
            **({"unschedulable": True} if group.unschedulable else {}),
        },
        "status": node_status(group, index, name, created),
    }


def node_labels(group: NodeGroup, name: str) -> dict[str, str]:
    """The kubelet's well-known labels, GPU feature discovery's, then the group's own."""
    return {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": f"gpu-{group.gpus}x-{group.gpu_model.lower()}",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": group.gpu_model,
        "nvidia.com/gpu.count": str(group.gpus),
        "nvidia.com/gpu.memory": str(group.gpu_memory),
        "nvidia.com/gpu.family": group.family,
        **driver_labels(group.driver),
        mig.CAPABLE_LABEL: "true" if mig.is_capable(group.gpu_model) else "false",
        # MIG instances or shared GPUs: another product, count and memory, and their own.
        **group.shape.labels(),
        **group.labels,
    }


def node_status(group: NodeGroup, index: int, name: str, created: str) -> dict[str, Any]:
    """The status the node's kubelet posts: resources, conditions, addresses, versions."""
    devices = {name: str(count) for name, count in group.shape.resources().items()}
    if group.dra:  # its GPUs are published as DRA devices, not advertised as a resource
        devices = {}
    return {
        "capacity": {"cpu": group.cpu, "memory": group.memory, "pods": "110", **devices},
        "allocatable": {
            "cpu": group.allocatable_cpu or group.cpu,
            "memory": group.allocatable_memory or group.memory,
            "pods": "110",
            **devices,
        },
        "conditions": node_conditions(group.ready, created),
        "addresses": [
            {"type": "InternalIP", "address": f"10.0.{index // 250}.{index % 250 + 1}"},
            {"type": "Hostname", "address": name},
        ],
        "nodeInfo": {
            "kubeletVersion": "v1.30.0",
            "kubeProxyVersion": "v1.30.0",
            "osImage": "Ubuntu 22.04.4 LTS",
            "kernelVersion": "5.15.0-105-generic",
            "containerRuntimeVersion": "containerd://1.7.13",
            "operatingSystem": "linux",
            "architecture": "amd64",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }


def node_conditions(ready: bool, created: str) -> list[dict[str, Any]]:
    """No pressure; Ready, or Unknown as a kubelet that stopped posting leaves it."""
    pressures = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    return [
        *(
            {
                "type": kind,
                "status": "False",
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": created,
                "lastTransitionTime": created,
            }
            for kind, reason, message in pressures
        ),
        {
            "type": "Ready",
            "status": "True" if ready else "Unknown",
            "reason": "KubeletReady" if ready else "NodeStatusUnknown",
            "message": "kubelet is posting ready status"
            if ready
            else "Kubelet stopped posting node status.",
            "lastHeartbeatTime": created,
            "lastTransitionTime": created,
        },
    ]


def pod_object(spec: PodSpec, name: str, node_name: str | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": f"registry.example/{spec.name}:1.0"}
    if spec.asks():
        container["resources"] = {"limits": {k: str(v) for k, v in spec.asks().items()}}
    pod_spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
    if node_name:
        pod_spec["nodeName"] = node_name
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.affinity_pool:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "gpu-pool",
                                    "operator": "In",
                                    "values": list(spec.affinity_pool),
                                }
                            ]
                        }
                    ]
                }
            }
        }
    if spec.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in spec.tolerations]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "labels": {"app": spec.name, **spec.labels},
            "annotations": {**spec.annotations, "kubesim.io/load": spec.load},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1" if spec.owner == "Job" else "apps/v1",
                    "kind": spec.owner,
                    "name": spec.name,
                    "uid": f"owner-{spec.namespace}-{spec.name}",
                    "controller": True,
                }
            ],
        },
        "spec": pod_spec,
    }
