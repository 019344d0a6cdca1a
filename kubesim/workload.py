"""The workload model: job classes, the jobs they send, and the pod objects and kubelet statuses
those jobs go through. Pure: no cluster, no clock, no I/O (`kubesim.workload_runner` drives it
through the cluster's own API, scheduler and clock).

A `JobClass` is a kind of job a team runs: its namespace and team label, its `workload-type`
label, GPUs per pod, CPU and memory requests, a run-time distribution (log-normal from its
median and p90), an arrival rate (a Poisson process, optionally following the working day
and week), a gang size (pods a job starts together), where it may run (a `gpu-pool` node
affinity and a toleration), and how its jobs end (the share of each failure kind; the rest
succeed).

`plan_window(job_class, seed, start, end)` gives the jobs that arrive in [start, end):
the same seed, class and window always give the same jobs, so a cluster replays the same
history and a test can know its answer.

How each way of ending looks on the pod, as the kubelet (and the scheduler, for preemption)
writes it — checked against kubernetes/kubernetes (`pkg/kubelet/eviction/helpers.go`,
`pkg/kubelet/images/image_manager.go`, `pkg/kubelet/kuberuntime/kuberuntime_container.go`,
`pkg/kubelet/status/status_manager.go`, `pkg/kubelet/active_deadline.go`,
`pkg/scheduler/framework/preemption/preemption.go`):

- `Succeeded`: phase Succeeded; container terminated, reason `Completed`, exit 0.
- `OOMKilled`: phase Failed; container terminated, reason `OOMKilled`, exit 137.
- `CudaOOM`: phase Failed; container terminated, reason `Error`, exit 1, its message (the
  log's last lines: `terminationMessagePolicy: FallbackToLogsOnError`) says
  `CUDA out of memory`.
- `GpuFault`: an XID on the pod's GPU in the DCGM exporter, then phase Failed; container
  terminated, reason `Error`, exit 1, message `RuntimeError: CUDA error: ...`.
- `ErrImagePull`: phase Pending, container waiting `ErrImagePull`, then `ImagePullBackOff`
  (`Back-off pulling image "..."`); after `activeDeadlineSeconds` phase Failed, reason
  `DeadlineExceeded`, the container `ContainerStatusUnknown`, exit 137 (the status
  manager's TerminatePod fills in a container that never ran).
- `CreateContainerConfigError`: as above, waiting `CreateContainerConfigError`
  (`secret "NAME" not found`).
- `Evicted`: phase Failed, reason `Evicted`, message `The node was low on resource: memory.
  ...`, condition DisruptionTarget `TerminationByKubelet`; container exit 137, `Error`.
- `Preempted`: condition DisruptionTarget `PreemptionByScheduler` (`default-scheduler:
  preempting to accommodate a higher priority pod`) and the scheduler's `Preempted` event,
  then phase Failed; container exit 137, `Error`. (A real API server removes the pod once
  its Job has counted it; kubesim keeps it for the retention, like the others.)

An image problem shows on the pod only while it waits (and in the kubelet's `Failed` and
`BackOff` events): once the deadline fails it, the kubelet replaces the waiting state, as a
real one does. A watcher that keeps pod history sees the waiting reason go by.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SUCCEEDED = "Succeeded"
OOM_KILLED = "OOMKilled"
CUDA_OOM = "CudaOOM"
GPU_FAULT = "GpuFault"
IMAGE_PULL = "ErrImagePull"
CONFIG_ERROR = "CreateContainerConfigError"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
# In the order a job's draw is matched against the shares (the rest succeed).
FAILURES = (OOM_KILLED, CUDA_OOM, GPU_FAULT, IMAGE_PULL, CONFIG_ERROR, EVICTED, PREEMPTED)
NEVER_STARTS = (IMAGE_PULL, CONFIG_ERROR)
OUTCOMES = (SUCCEEDED, *FAILURES)

GPU = "nvidia.com/gpu"
CLASS_LABEL = "kubesim.io/job-class"
Z90 = 1.2815515655446004  # the standard normal's 90th percentile

# Common XIDs a GPU fault raises, with what the CUDA runtime tells the process.
XID_CUDA_ERRORS = {
    79: "CUDA error: unspecified launch failure",
    48: "CUDA error: uncorrectable ECC error encountered",
    31: "CUDA error: an illegal memory access was encountered",
    13: "CUDA error: an illegal instruction was encountered",
}


@dataclass(frozen=True)
class JobClass:
    name: str
    namespace: str
    team: str
    workload_type: str
    gpus: int = 1
    cpu: str = "8"
    memory: str = "64Gi"
    run_median: float = 3600.0  # seconds
    run_p90: float = 7200.0
    arrivals_per_hour: float = 1.0
    gang: int = 1
    pool: str | None = None  # required node affinity: gpu-pool In [pool]
    tolerate: str | None = None  # a toleration (Exists, NoSchedule) for this taint key
    load: str = "training"  # the exporter's figures for its GPUs: training | inference | idle
    failures: Mapping[str, float] = field(default_factory=dict)
    # 0: arrivals flat; up to 1: busier in working hours (peak 14:00 UTC), quieter at weekends.
    daily_cycle: float = 0.0
    # Bound straight to a node of this pool (spec.nodeName, no scheduler), without tolerating
    # its taint: how an "intruder" gets onto a dedicated pool.
    intrude_on: str | None = None
    image: str = ""
    deadline: int = 3600  # activeDeadlineSeconds: how long a pod that never starts may wait
    priority_class: str = ""

    def __post_init__(self) -> None:
        unknown = set(self.failures) - set(FAILURES)
        if unknown:
            raise ValueError(f"{self.name}: unknown failure kinds {sorted(unknown)}")
        if sum(self.failures.values()) > 1:
            raise ValueError(f"{self.name}: failure shares add up to more than 1")
        if self.run_p90 < self.run_median or self.run_median <= 0:
            raise ValueError(f"{self.name}: run_p90 must be at least run_median, both positive")

    @property
    def image_ref(self) -> str:
        return self.image or f"registry.example/{self.team}/{self.name}:1.0"


@dataclass(frozen=True)
class Job:
    job_class: str
    name: str  # the Job's name; its pods are NAME-[K-]SUFFIX
    arrival: float
    run_seconds: float  # how long it would run if nothing ended it early
    outcome: str
    ends_after: float  # seconds after starting that it ends (the run, or the failure's moment)
    xid: int  # the XID a GPU fault raises (0 otherwise)


def arrival_factor(job_class: JobClass, when: float) -> float:
    """The arrival rate's multiplier at `when` (0..1 + daily_cycle)."""
    cycle = job_class.daily_cycle
    if not cycle:
        return 1.0
    day = (int(when // 86400) + 3) % 7  # 1970-01-01 was a Thursday: 0 is Monday
    hour = (when % 86400) / 3600
    factor = 1 + cycle * math.cos((hour - 14) / 24 * 2 * math.pi)
    return factor * (1 - cycle * 0.7) if day >= 5 else factor


def _rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.sha256("/".join(map(str, (seed, *parts))).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))  # noqa: S311 -- simulation


def run_seconds(job_class: JobClass, rng: random.Random) -> float:
    sigma = math.log(job_class.run_p90 / job_class.run_median) / Z90
    return max(30.0, job_class.run_median * math.exp(sigma * rng.gauss(0, 1)))


def draw_outcome(job_class: JobClass, rng: random.Random) -> str:
    draw, total = rng.random(), 0.0
    for kind in FAILURES:
        total += job_class.failures.get(kind, 0.0)
        if draw < total:
            return kind
    return SUCCEEDED


def plan_window(job_class: JobClass, seed: int, start: float, end: float) -> list[Job]:
    """The jobs of `job_class` arriving in [start, end), in arrival order (thinning a Poisson
    process at the peak rate down to the rate of the moment)."""
    rng = _rng(seed, job_class.name, int(start))
    peak = job_class.arrivals_per_hour / 3600 * (1 + job_class.daily_cycle)
    jobs: list[Job] = []
    if peak <= 0:
        return jobs
    when = start
    while True:
        when += rng.expovariate(peak)
        if when >= end:
            return jobs
        accept = rng.random() * (1 + job_class.daily_cycle) < arrival_factor(job_class, when)
        run = run_seconds(job_class, rng)
        outcome = draw_outcome(job_class, rng)
        ends_after = run if outcome == SUCCEEDED else run * rng.uniform(0.05, 0.9)
        xid = rng.choice(sorted(XID_CUDA_ERRORS)) if outcome == GPU_FAULT else 0
        if accept:
            name = f"{job_class.name}-{int(start) // 60 % 100000:05d}{len(jobs):03d}"
            jobs.append(Job(job_class.name, name, when, run, outcome, ends_after, xid))


ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet


def pod_name(job: Job, index: int) -> str:
    digest = hashlib.sha256(f"{job.name}/{index}".encode()).digest()
    suffix = "".join(ALPHABET[b % len(ALPHABET)] for b in digest[:5])
    return f"{job.name}-{index}-{suffix}"


def pod_manifest(job_class: JobClass, job: Job, index: int) -> dict[str, Any]:
    """The pod a Job's controller creates for one member of the job (Indexed completion)."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": pod_name(job, index),
            "namespace": job_class.namespace,
            "labels": {
                "team": job_class.team,
                "workload-type": job_class.workload_type,
                CLASS_LABEL: job_class.name,
                "batch.kubernetes.io/job-name": job.name,
                "job-name": job.name,
                "batch.kubernetes.io/job-completion-index": str(index),
            },
            "annotations": {
                "kubesim.io/load": job_class.load,
                "batch.kubernetes.io/job-completion-index": str(index),
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job.name,
                    "uid": str(_job_uid(job)),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": _pod_spec(job_class, job),
    }


def _pod_spec(job_class: JobClass, job: Job) -> dict[str, Any]:
    """The job template's pod spec: its container, its pool, its priority."""
    spec: dict[str, Any] = {
        "containers": [_container(job_class, job)],
        "restartPolicy": "Never",
        "activeDeadlineSeconds": job_class.deadline,
    }
    if job_class.pool:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "gpu-pool", "operator": "In", "values": [job_class.pool]}
                            ]
                        }
                    ]
                }
            }
        }
    if job_class.tolerate:
        spec["tolerations"] = [
            {"key": job_class.tolerate, "operator": "Exists", "effect": "NoSchedule"}
        ]
    if job_class.priority_class:
        spec["priorityClassName"] = job_class.priority_class
    return spec


def _container(job_class: JobClass, job: Job) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": job_class.cpu, "memory": job_class.memory}
    limits: dict[str, str] = {"memory": job_class.memory}
    if job_class.gpus:
        requests[GPU] = limits[GPU] = str(job_class.gpus)
    container: dict[str, Any] = {
        "name": "main",
        "image": job_class.image_ref,
        "resources": {"requests": requests, "limits": limits},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "imagePullPolicy": "IfNotPresent",
    }
    if CONFIG_ERROR in job_class.failures:
        container["env"] = [
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": f"{job.name}-token", "key": "token"}},
            }
        ]
    return container


def _job_uid(job: Job) -> str:
    h = hashlib.sha256(f"job/{job.name}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


# --- kubelet statuses ---


def _conditions(
    scheduled: str, now: str, ready: bool, reason: str | None = None, message: str | None = None
) -> list[dict[str, Any]]:
    not_ready = {"status": "False", "lastTransitionTime": now}
    if reason:
        not_ready["reason"] = reason
    if message:
        not_ready["message"] = message
    ready_state = {"status": "True", "lastTransitionTime": scheduled} if ready else not_ready
    return [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": scheduled},
        {"type": "Initialized", "status": "True", "lastTransitionTime": scheduled},
        {"type": "Ready", **ready_state},
        {"type": "ContainersReady", **ready_state},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled},
    ]


def _scheduled_at(status: dict[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return str(condition.get("lastTransitionTime"))
    return str(status.get("startTime", ""))


def waiting_status(
    pod: dict[str, Any], running: dict[str, Any], reason: str, message: str, now: str
) -> dict[str, Any]:
    """A pod whose container cannot start: Pending, its container waiting with `reason`."""
    scheduled = _scheduled_at(running)
    names = [c.get("name", "") for c in pod["spec"]["containers"]]
    unready = f"containers with unready status: [{' '.join(names)}]"
    status = {k: v for k, v in running.items() if k != "containerStatuses"}
    status["phase"] = "Pending"
    status["conditions"] = _conditions(scheduled, now, False, "ContainersNotReady", unready)
    status["containerStatuses"] = [
        {
            "name": c.get("name", ""),
            "ready": False,
            "restartCount": 0,
            "image": c.get("image", ""),
            "imageID": "",
            "started": False,
            "state": {"waiting": {"reason": reason, "message": message}},
            "lastState": {},
        }
        for c in pod["spec"]["containers"]
    ]
    return status


def image_pull_message(image: str) -> str:
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )


def backoff_message(image: str) -> str:
    return f'Back-off pulling image "{image}"'


def config_error_message(job: Job) -> str:
    return f'secret "{job.name}-token" not found'


def cuda_oom_message(job_class: JobClass, rng_seed: str) -> str:
    digest = hashlib.sha256(rng_seed.encode()).digest()
    wanted = 1 + digest[0] % 8
    free = (digest[1] % 200) / 100
    return (
        '  File "/app/train.py", line 212, in forward\n'
        "    attn = torch.matmul(q, k.transpose(-2, -1))\n"
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {wanted}.00 GiB. "
        f"GPU 0 has a total capacity of 79.14 GiB of which {free:.2f} GiB is free. "
        "Process 1 has 77.02 GiB memory in use.\n"
    )


def gpu_fault_message(xid: int) -> str:
    return (
        f"RuntimeError: {XID_CUDA_ERRORS.get(xid, 'CUDA error: unknown error')}\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n"
    )


def eviction_message(job_class: JobClass) -> str:
    return (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "
        f"Container main was using {_more(job_class.memory)}, request is {job_class.memory}, "
        "has larger consumption of memory. "
    )


def _more(quantity: str) -> str:
    digits = "".join(ch for ch in quantity if ch.isdigit())
    unit = quantity[len(digits) :]
    return f"{int(digits or 1) * 5 // 4}{unit}"


PREEMPTION_MESSAGE = "default-scheduler: preempting to accommodate a higher priority pod"
DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
UNKNOWN_MESSAGE = "The container could not be located when the pod was terminated"


@dataclass(frozen=True)
class Ending:
    """How a pod's container and the pod itself end."""

    exit_code: int
    reason: str
    message: str = ""
    pod_reason: str = ""
    pod_message: str = ""
    disruption: tuple[str, str] | None = None  # DisruptionTarget (reason, message)


def ending_for(job_class: JobClass, job: Job, pod_name_: str) -> Ending:
    outcome = job.outcome
    if outcome == SUCCEEDED:
        return Ending(0, "Completed")
    if outcome == OOM_KILLED:
        return Ending(137, "OOMKilled")
    if outcome == CUDA_OOM:
        return Ending(1, "Error", cuda_oom_message(job_class, pod_name_))
    if outcome == GPU_FAULT:
        return Ending(1, "Error", gpu_fault_message(job.xid))
    if outcome == EVICTED:
        message = eviction_message(job_class)
        return Ending(137, "Error", "", "Evicted", message, ("TerminationByKubelet", message))
    if outcome == PREEMPTED:
        return Ending(137, "Error", disruption=("PreemptionByScheduler", PREEMPTION_MESSAGE))
    # Never started: the active deadline fails the pod, TerminatePod fills the container in.
    return Ending(137, "ContainerStatusUnknown", UNKNOWN_MESSAGE, DEADLINE_REASON, DEADLINE_MESSAGE)


def terminal_status(
    pod: dict[str, Any], current: dict[str, Any], ending: Ending, now: str
) -> dict[str, Any]:
    """The pod's status once its container has ended (phase Succeeded or Failed)."""
    scheduled = _scheduled_at(current)
    status = {k: v for k, v in current.items() if k not in ("containerStatuses", "conditions")}
    status["phase"] = "Succeeded" if ending.exit_code == 0 else "Failed"
    conditions = _conditions(scheduled, now, False, "PodCompleted")
    conditions[0] = {**conditions[0], "status": "False", "lastTransitionTime": now}
    if ending.disruption:
        reason, message = ending.disruption
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": _disrupted_at(current, now),
            }
        )
    status["conditions"] = conditions
    if ending.pod_reason:
        status["reason"], status["message"] = ending.pod_reason, ending.pod_message
    previous = {c.get("name"): c for c in current.get("containerStatuses") or []}
    status["containerStatuses"] = [
        _terminated(c, previous.get(c.get("name")) or {}, ending, now)
        for c in pod["spec"]["containers"]
    ]
    return status


def _disrupted_at(current: dict[str, Any], now: str) -> str:
    for condition in current.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget":
            return str(condition.get("lastTransitionTime"))
    return now


def _terminated(
    container: dict[str, Any], previous: dict[str, Any], ending: Ending, now: str
) -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": ending.exit_code, "reason": ending.reason}
    running = (previous.get("state") or {}).get("running")
    if ending.message:
        state["message"] = ending.message
    if running:
        state["startedAt"] = running.get("startedAt")
        state["finishedAt"] = now
        state["containerID"] = previous.get("containerID", "")
    return {
        "name": container.get("name", ""),
        "ready": False,
        "restartCount": 0,
        "image": container.get("image", ""),
        "imageID": previous.get("imageID", ""),
        **({"containerID": previous["containerID"]} if previous.get("containerID") else {}),
        "started": False,
        "state": {"terminated": state},
        "lastState": {},
    }


def disruption_condition(reason: str, message: str, now: str) -> dict[str, Any]:
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
