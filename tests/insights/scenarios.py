"""Worlds where the right answer is known: GPU nodes stored through tests/factories.py (the
inventory's own parsing), GpuPod rows of their history, and the utilisation series
Prometheus would return for them. Each scenario builds one or two pools:

- idle: 6 dedicated A100 nodes, one hour of work a day on each, 3 % utilisation;
- queue: 4 nodes kept full, with pods that waited two hours while the idle pool had room,
  more of them in the window's second half (the idle pool comes with it);
- shortage: the same queue with no other pool, so no pool had room;
- fragments: the queue's 4-GPU pods waited while a shared pool at 10 % had 6 GPUs free on
  each of its 8 nodes, every node running one small job (no node wholly idle), and one of
  them waits now;
- oom: 20 jobs, 6 OOMKilled, 3 CUDA out-of-memory, 1 image pull failure;
- mixed_drivers: 8 nodes, 5 on driver 550.54.15 and 3 on 535.161.08;
- gpu_faults: failures mostly XID and driver errors;
- failure_classes: a serving pool's 21 failures, one or more in every class the seed keeps
  apart, most of them CUDA and driver errors (as the demo's inference pool);
- handmade: nodes set up by hand (a hand label, a hand taint, kernels that differ);
- small: 2 dedicated nodes whose utilisation is low with short peaks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pools.models import GpuPod, Node, Pool
from tests.factories import A100, Group, Pod, node_and_pods, store

# The window ends now (the pages and the API read up to now), on the hour.
NOW = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
DAYS = 30
START = NOW - timedelta(days=DAYS)
HOUR = timedelta(hours=1)
DRIVER_LABEL = "nvidia.com/cuda.driver-version.full"
_uid = itertools.count()


@dataclass
class World:
    pools: list[str]
    # Per pool: (average utilisation, idle whole nodes), one point an hour.
    average: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    idle_nodes: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    xid_times: dict[str, list[float]] = field(default_factory=dict)


def hourly(value: Callable[[int], float]) -> list[tuple[float, float]]:
    start = START.timestamp()
    return [(start + h * 3600, value(h)) for h in range(DAYS * 24)]


def make_pool(name: str, *, target: int = 60, dedicated: bool = True) -> Pool:
    return Pool.objects.create(
        name=name,
        display_name=name,
        labels={"workload-type": name},
        taint_key=f"workload-{name}" if dedicated else "",
        taint_value="true" if dedicated else "",
        taint_effect="NoSchedule" if dedicated else "",
        utilisation_target=target,
    )


def make_nodes(pool: str, count: int, *, labels: dict[str, str] | None = None) -> list[str]:
    names = [f"{pool}-{i:03d}" for i in range(count)]
    store(node_and_pods(n, Group(n, 1, pool, gpu=A100, extra_labels=labels or {})) for n in names)
    return names


def pod(
    pool: str,
    node: str,
    created: datetime,
    *,
    wait: timedelta = timedelta(seconds=5),
    run: timedelta | None = HOUR,
    gpus: int = 8,
    namespace: str = "ml",
    workload_type: str = "training",
    **fields: object,
) -> GpuPod:
    """A GPU pod created at `created`, bound after `wait` (None: still pending), run for
    `run` (None: still running); `fields` set the rest (termination reason, ...)."""
    scheduled = created + wait if wait is not None else None
    started = scheduled + timedelta(seconds=10) if scheduled is not None else None
    finished = started + run if started is not None and run is not None else None
    failed = "termination_reason" in fields or "exit_code" in fields
    phase = (
        GpuPod.Phase.PENDING
        if started is None
        else GpuPod.Phase.RUNNING
        if finished is None
        else GpuPod.Phase.FAILED
        if failed
        else GpuPod.Phase.SUCCEEDED
    )
    number = next(_uid)
    started = fields.pop("started_at", started)  # type: ignore[assignment]
    return GpuPod(
        uid=f"uid-{number}",
        namespace=namespace,
        name=f"{pool}-job-{number}",
        node_name=node if scheduled else "",
        pool_label=pool if scheduled else "",
        phase=fields.pop("phase", phase),
        gpus=gpus,
        units=fields.pop("units", gpus),  # whole GPUs unless the test says otherwise
        cpu_milli=8000,
        memory_bytes=64 * 2**30,
        workload_type=workload_type,
        created_at=created,
        scheduled_at=scheduled,
        started_at=started,
        finished_at=finished,
        **fields,
    )


def idle(world: World | None = None) -> World:
    world = world or World([])
    make_pool("idle")
    nodes = make_nodes("idle", 6)
    GpuPod.objects.bulk_create(
        pod("idle", node, START + timedelta(days=day, hours=9))
        for day in range(DAYS)
        for node in nodes
    )
    world.pools.append("idle")
    world.average["idle"] = hourly(lambda h: 3.0)
    world.idle_nodes["idle"] = hourly(lambda h: 5.0)
    return world


def _queue(world: World, *, waiting_gpus: int = 8) -> World:
    make_pool("queue")
    nodes = make_nodes("queue", 4)
    # Each node runs 8-GPU jobs back to back, 12 hours each, the last still running.
    pods = [
        pod(
            "queue",
            node,
            START + timedelta(hours=12 * k),
            run=None if k == 2 * DAYS - 1 else 12 * HOUR,
        )
        for node in nodes
        for k in range(2 * DAYS)
    ]
    # 6 pods waited two hours in the first half, 14 in the second.
    for day in [*range(2, 14, 2), *range(16, 30)]:
        pods.append(
            pod(
                "queue",
                nodes[day % 4],
                START + timedelta(days=day, hours=3),
                wait=2 * HOUR,
                gpus=waiting_gpus,
            )
        )
    GpuPod.objects.bulk_create(pods)
    world.pools.append("queue")
    world.average["queue"] = hourly(lambda h: 95.0)
    world.idle_nodes["queue"] = []
    return world


def queue() -> World:
    return _queue(idle())


def shortage() -> World:
    return _queue(World([]))


# What a queue pod asks for to land on the queue's nodes only.
QUEUE_SELECTOR = {"workload-type": "queue"}
QUEUE_TOLERATION = {"key": "workload-queue", "operator": "Exists", "effect": "NoSchedule"}


def fragments() -> World:
    world = World([])
    make_pool("spare", dedicated=False)
    names = [f"spare-{i:03d}" for i in range(8)]
    notebook = (Pod("notebook", "research", 2),)
    store(node_and_pods(n, Group(n, 1, "spare", gpu=A100, pods=notebook)) for n in names)
    world.pools.append("spare")
    world.average["spare"] = hourly(lambda h: 10.0)
    world.idle_nodes["spare"] = []
    _queue(world, waiting_gpus=4)
    waiting = pod(
        "queue",
        "",
        NOW - 3 * HOUR,
        wait=None,
        gpus=4,
        node_selector=QUEUE_SELECTOR,
        tolerations=[QUEUE_TOLERATION],
    )
    waiting.save()
    return world


def oom() -> World:
    make_pool("oom")
    nodes = make_nodes("oom", 4)
    pods = []
    for k in range(20):
        created = START + timedelta(days=k + 1)
        node = nodes[k % 4]
        if k < 6:
            extra = {"termination_reason": "OOMKilled", "exit_code": 137}
        elif k < 9:
            extra = {
                "termination_reason": "Error",
                "exit_code": 1,
                "termination_message": "torch.OutOfMemoryError: CUDA out of memory. "
                "Tried to allocate 2.00 GiB",
            }
        elif k == 9:
            pods.append(
                pod(
                    "oom",
                    node,
                    created,
                    run=None,
                    phase=GpuPod.Phase.PENDING,
                    started_at=None,  # bound, its image never pulled
                    waiting_reason="ErrImagePull",
                )
            )
            continue
        else:
            extra = {}
        pods.append(pod("oom", node, created, **extra))
    GpuPod.objects.bulk_create(pods)
    world = World(["oom"])
    world.average["oom"] = hourly(lambda h: 60.0 + (h % 10))
    world.idle_nodes["oom"] = []
    return world


def mixed_drivers() -> World:
    make_pool("drivers")
    make_nodes("drivers", 5, labels={DRIVER_LABEL: "550.54.15"})
    odd = [f"drivers-{i:03d}" for i in range(5, 8)]
    store(
        node_and_pods(n, Group(n, 1, "drivers", extra_labels={DRIVER_LABEL: "535.161.08"}))
        for n in odd
    )
    GpuPod.objects.bulk_create(
        pod("drivers", f"drivers-{k % 8:03d}", START + timedelta(hours=6 * k), run=5 * HOUR)
        for k in range(4 * DAYS)
    )
    world = World(["drivers"])
    world.average["drivers"] = hourly(lambda h: 62.0)
    world.idle_nodes["drivers"] = []
    return world


def gpu_faults() -> World:
    make_pool("faults")
    nodes = make_nodes("faults", 4)
    messages = [
        "NVRM: Xid (PCI:0000:17:00): 79, GPU has fallen off the bus",
        "Xid 48: double bit ECC error",
        "failed to allocate device: device plugin reported the GPU unhealthy",
        "NVRM: Xid 13 Graphics Exception",
    ]
    pods = [
        pod(
            "faults",
            nodes[k],
            START + timedelta(days=3 * k + 1),
            exit_code=1,
            termination_reason="Error",
            termination_message=m,
        )
        for k, m in enumerate(messages)
    ]
    # One failed with no message, while its node reported an XID error.
    silent = pod(
        "faults", nodes[0], START + timedelta(days=20), exit_code=1, termination_reason="Error"
    )
    pods += [
        silent,
        pod(
            "faults",
            nodes[1],
            START + timedelta(days=22),
            termination_reason="OOMKilled",
            exit_code=137,
        ),
    ]
    pods += [pod("faults", nodes[k % 4], START + timedelta(days=k, hours=5)) for k in range(25)]
    GpuPod.objects.bulk_create(pods)
    world = World(["faults"])
    world.average["faults"] = hourly(lambda h: 58.0)
    world.idle_nodes["faults"] = []
    assert silent.started_at is not None
    world.xid_times = {nodes[0]: [silent.started_at.timestamp() + 600]}
    return world


# The known answer of failure_classes(), derived from how it is built, not from the portal.
FAILURE_CLASSES = {
    "oom": 1,
    "gpu_fault": 11,  # 8 CUDA errors, 2 silent exits while the node logged an XID, 1 driver
    "image": 2,  # one of them created before the window, given up inside it
    "resources": 2,
    "eviction": 1,
    "timeout": 3,
    "other": 1,
}


def failure_classes() -> World:
    """A serving pool's month: 20 pods that succeeded and 21 that failed, of every class
    the seed keeps apart, all of one namespace and workload type (one profile)."""
    make_pool("serving")
    nodes = make_nodes("serving", 4)
    serve = {"namespace": "serve", "workload_type": "inference"}
    at = itertools.count(1)

    def ended(node: int = 0, **fields: object) -> GpuPod:
        return pod(
            "serving", nodes[node], START + timedelta(hours=15 * next(at)), **serve, **fields
        )

    cuda = [
        "RuntimeError: CUDA error: unspecified launch failure",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    pods = [
        ended(k % 4, exit_code=1, termination_reason="Error", termination_message=cuda[k % 2])
        for k in range(8)
    ]
    silent = [ended(2, exit_code=1, termination_reason="Error") for _ in range(2)]
    pods += silent
    pods.append(
        ended(
            3,
            exit_code=1,
            termination_reason="Error",
            termination_message="CUDA driver version is insufficient for CUDA runtime version",
        )
    )
    pods += [ended(1, exit_code=137, termination_reason="DeadlineExceeded") for _ in range(3)]
    for _ in range(2):  # refused by the kubelet: the node's GPUs were taken
        refused = ended(
            0,
            termination_reason="OutOfnvidia.com/gpu",
            termination_message="Pod was rejected: Node didn't have enough resource: "
            "nvidia.com/gpu, requested: 8, used: 4, capacity: 8",
        )
        refused.started_at = None
        pods.append(refused)
    pods.append(ended(1, exit_code=137, termination_reason="OOMKilled"))
    pods.append(ended(2, exit_code=137, termination_reason="Evicted"))
    pods.append(ended(3, exit_code=1, termination_reason="Error", termination_message="KeyError"))
    pulling = ended(0, waiting_reason="ImagePullBackOff", run=None, phase=GpuPod.Phase.PENDING)
    pulling.started_at = None
    pods.append(pulling)
    # Created before the window, its image never came; deleted inside the window.
    before = pod(
        "serving",
        nodes[1],
        START - timedelta(days=1),
        run=None,
        phase=GpuPod.Phase.PENDING,
        waiting_reason="ErrImagePull",
        deleted_at=START + timedelta(hours=2),
        **serve,
    )
    before.started_at = None
    pods.append(before)
    pods += [ended(k % 4) for k in range(20)]
    GpuPod.objects.bulk_create(pods)
    world = World(["serving"])
    world.average["serving"] = hourly(lambda h: 50.0)
    world.idle_nodes["serving"] = []
    world.xid_times = {
        nodes[2]: [p.started_at.timestamp() + 600 for p in silent if p.started_at is not None]
    }
    return world


def handmade() -> World:
    make_pool("handmade")
    names = make_nodes("handmade", 5, labels={"rack-setup": "manual"})
    for i, name in enumerate(names):
        node = Node.objects.get(name=name)
        node.labels["feature.node.kubernetes.io/kernel-version.full"] = (
            "5.15.0-105-generic" if i < 3 else "6.5.0-35-generic"
        )
        node.taints = [
            *node.taints,
            {"key": "maintenance-by", "value": "ops", "effect": "NoSchedule"},
        ]
        node.save(update_fields=["labels", "taints"])
    GpuPod.objects.bulk_create(
        pod("handmade", names[k % 5], START + timedelta(hours=5 * k), run=4 * HOUR)
        for k in range(24 * DAYS // 5)
    )
    world = World(["handmade"])
    world.average["handmade"] = hourly(lambda h: 65.0)
    world.idle_nodes["handmade"] = []
    return world


def small() -> World:
    make_pool("small")
    nodes = make_nodes("small", 2)
    GpuPod.objects.bulk_create(
        pod("small", nodes[d % 2], START + timedelta(days=d, hours=10), run=2 * HOUR)
        for d in range(DAYS)
    )
    world = World(["small"])
    # Two busy hours a day at 100 %, the rest at 2 %.
    world.average["small"] = hourly(lambda h: 100.0 if h % 24 in (10, 11) else 2.0)
    world.idle_nodes["small"] = hourly(lambda h: 1.0 if h % 24 in (10, 11) else 2.0)
    return world


SLICE = "nvidia.com/mig-1g.10gb"


def mig_slices() -> World:
    """slices: 2 A100 nodes whose GPUs are split into 56 MIG 1g.10gb instances each (mixed
    strategy: no nvidia.com/gpu), 28 pods of one instance running on the first all along,
    and one pod a day that waited an hour for an instance."""
    make_pool("slices")
    nodes = make_nodes("slices", 2)
    record = {
        "model": "NVIDIA-A100-SXM4-80GB",
        "memory_mib": 81920,
        "gpus": 8,
        "mig_gpus": 8,
        "units": [["mig", SLICE, "1g.10gb", "", 1, 56]],
        "operator": {},
    }
    Node.objects.filter(name__in=nodes).update(
        gpu_allocatable=0, gpu_allocated=0, devices=record, resources={SLICE: 56}, pods=[]
    )
    Node.objects.filter(name=nodes[0]).update(resources_requested={SLICE: 28})
    one = {"gpus": 0, "units": 1, "unit_requests": {SLICE: 1}, "workload_type": "inference"}
    pods = [pod("slices", nodes[0], START, run=None, **one) for _ in range(28)]  # type: ignore[arg-type]
    pods += [
        pod("slices", nodes[1], START + timedelta(days=d, hours=8), wait=HOUR, run=HOUR, **one)  # type: ignore[arg-type]
        for d in range(DAYS)
    ]
    GpuPod.objects.bulk_create(pods)
    world = World(["slices"])
    world.average["slices"] = hourly(lambda h: 25.0)
    world.idle_nodes["slices"] = []
    return world


SCENARIOS: dict[str, Callable[[], World]] = {
    "idle": lambda: idle(),
    "queue": queue,
    "shortage": shortage,
    "fragments": fragments,
    "oom": oom,
    "mixed_drivers": mixed_drivers,
    "gpu_faults": gpu_faults,
    "failure_classes": failure_classes,
    "handmade": handmade,
    "small": small,
}
