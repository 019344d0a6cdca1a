"""A GPU pod as the inventory keeps it, read from the API object (pure).

The times come from where the kubelet and the scheduler write them: `creationTimestamp`,
the `PodScheduled` condition turning True, the containers' `startedAt` (the pod's
`startTime` when no container has started yet: it is when the kubelet took the pod), and
for a pod that ended, the last container's `finishedAt`. A pod being deleted carries
`deletionTimestamp` (the end of its grace period) and `deletionGracePeriodSeconds`: it has
been terminating since the first minus the second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from pools.core.devices import is_gpu_unit
from pools.core.fit.api_objects import FINISHED
from pools.core.fit.fields import FieldReader
from pools.core.fit.resources import Resources, read_pod_resources

Raw = Mapping[str, Any]
_MAX_TEXT = 4096  # a termination message can be long; the kubelet caps it at 4 KiB too


@dataclass(frozen=True)
class PodLabels:
    """Which pod labels name the workload type and the team, and which annotations name the
    pod's contact and opt it out of reclaiming idle GPUs (settings)."""

    workload: str = "workload-type"
    team: str = "team"
    contact: str = "gpu-portal.io/contact"
    opt_out: str = "gpu-portal.io/reclaim"


# The opt-out annotation's value that keeps a pod's idle GPUs from being reclaimed.
OPT_OUT_VALUE = "never"


@dataclass(frozen=True)
class PodRecord:
    uid: str
    namespace: str
    name: str
    node_name: str
    phase: str
    gpus: int
    cpu_milli: int
    memory_bytes: int
    owner_kind: str
    owner_name: str
    workload_type: str
    team: str
    priority_class: str
    priority: int | None
    created_at: datetime
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    terminating_since: datetime | None
    termination_reason: str
    exit_code: int | None
    termination_message: str
    unschedulable_message: str
    waiting_reason: str
    restarts: int
    node_selector: dict[str, Any] = field(default_factory=dict)
    affinity: dict[str, Any] = field(default_factory=dict)
    tolerations: list[Any] = field(default_factory=list)
    resource_version: str = ""
    # Every GPU unit the pod asks for, whatever its kind: whole GPUs (`gpus`), MIG instances
    # (nvidia.com/mig-<profile>), shared GPUs (nvidia.com/gpu.shared); and those of the
    # other resources by name.
    units: int = 0
    unit_requests: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # what disruption budgets select on
    contact: str = ""  # whom to tell when its GPUs sit idle (an annotation)
    reclaim_opt_out: bool = False  # its owner asked that its idle GPUs never be reclaimed


def gpu_unit_requests(requests: Resources) -> dict[str, int]:
    """What a pod asks for of GPU units other than whole `nvidia.com/gpu`, by resource."""
    return {name: n for name, n in requests.extended if n > 0 and is_gpu_unit(name)}


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time from the API ("2026-11-30T09:16:54Z"), or None."""
    if not isinstance(value, str) or not value:
        return None
    return _parse_text(value)


@lru_cache(maxsize=8192)
def _parse_text(value: str) -> datetime | None:
    # Pods of one job share their times: a listing parses each distinct one once.
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def pod_requests(raw: Raw, cache: dict[str, Resources] | None = None) -> Resources:
    """What the scheduler counts the pod as requesting (limits default requests, init
    containers, sidecars, overhead). Pods of one controller look alike: `cache` keeps the
    figures by what they are computed from."""
    spec = raw.get("spec") or {}
    key = repr(
        (
            [c.get("resources") for c in spec.get("containers") or []],
            [
                (c.get("resources"), c.get("restartPolicy"))
                for c in spec.get("initContainers") or []
            ],
            spec.get("overhead"),
        )
    )
    if cache is not None and (found := cache.get(key)) is not None:
        return found
    requests = read_pod_resources(FieldReader(), spec, "spec").requests
    if cache is not None:
        cache[key] = requests
    return requests


def _owner(meta: Raw) -> Raw:
    owners = meta.get("ownerReferences") or []
    return next((o for o in owners if o.get("controller")), owners[0] if owners else {})


def _conditions(status: Raw) -> dict[str, Raw]:
    """The pod's conditions by type (the first of each)."""
    found: dict[str, Raw] = {}
    for condition in status.get("conditions") or []:
        found.setdefault(condition.get("type"), condition)
    return found


@dataclass
class _Containers:
    """What the containers' statuses (init containers first) say, read in one pass."""

    started: datetime | None = None  # the earliest start, running or terminated
    finished: datetime | None = None  # the latest end
    ended: list[Raw] = field(default_factory=list)  # each one's terminated state, if any
    waiting_reason: str = ""  # the first container's that waits
    restarts: int = 0

    def read(self, container: Raw) -> None:
        state, last = container.get("state") or {}, container.get("lastState") or {}
        for source in (state, last):
            for phase, key in (("running", "startedAt"), ("terminated", "startedAt")):
                when = parse_time((source.get(phase) or {}).get(key))
                if when is not None and (self.started is None or when < self.started):
                    self.started = when
            when = parse_time((source.get("terminated") or {}).get("finishedAt"))
            if when is not None and (self.finished is None or when > self.finished):
                self.finished = when
        if terminated := state.get("terminated") or last.get("terminated"):
            self.ended.append(terminated)
        reason = (state.get("waiting") or {}).get("reason")
        if reason and not self.waiting_reason:
            self.waiting_reason = str(reason)
        self.restarts += int(container.get("restartCount") or 0)


def _containers(status: Raw) -> _Containers:
    found = _Containers()
    for group in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(group) or []:
            found.read(container)
    return found


def _started(status: Raw, containers: _Containers) -> datetime | None:
    if containers.started is not None:
        return containers.started
    # No container start recorded (an evicted pod's status can be that short): the kubelet's
    # acceptance, but only once the pod ran; a pod pulling its image has not started.
    if status.get("phase") in ("Running", *FINISHED):
        return parse_time(status.get("startTime"))
    return None


def _finished(
    status: Raw, containers: _Containers, ready: Raw, observed: datetime
) -> datetime | None:
    if status.get("phase") not in FINISHED:
        return None
    if containers.finished is not None:
        return containers.finished
    # Evicted or past its deadline, no container ever ran: when it stopped being ready.
    return parse_time(ready.get("lastTransitionTime")) or observed


def _termination(status: Raw, ended: list[Raw], disrupted: Raw) -> tuple[str, int | None, str]:
    """Why the pod ended: the pod's own reason (Evicted, DeadlineExceeded) first, then its
    DisruptionTarget condition's, then the first container that failed, then any that
    ended."""
    failed = [t for t in ended if t.get("exitCode")]
    chosen = (failed or ended or [{}])[0]
    code = chosen.get("exitCode")
    # A pod the scheduler preempted or the API evicted has no reason of its own: its
    # DisruptionTarget condition says why, where the container says only "Error".
    if status.get("phase") != "Failed" or disrupted.get("status") != "True":
        disrupted = {}
    reason = str(status.get("reason") or disrupted.get("reason") or chosen.get("reason") or "")
    message = str(status.get("message") or disrupted.get("message") or chosen.get("message") or "")
    return reason, code if isinstance(code, int) else None, message[:_MAX_TEXT]


def _terminating_since(meta: Raw) -> datetime | None:
    deletion = parse_time(meta.get("deletionTimestamp"))
    if deletion is None:
        return None
    grace = meta.get("deletionGracePeriodSeconds")
    return deletion - timedelta(seconds=grace if isinstance(grace, int) else 0)


def _unschedulable(scheduled: Raw) -> str:
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return str(scheduled.get("message") or "")[:_MAX_TEXT]
    return ""


def pod_record(
    raw: Raw,
    *,
    labels: PodLabels,
    observed: datetime,
    requests: Resources | None = None,
) -> PodRecord:
    """The pod's row; `observed` stands for a time the API object does not give (when it
    was created, if it has no creationTimestamp; when it ended, if nothing says)."""
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    pod_labels = meta.get("labels") or {}
    containers = _containers(status)
    conditions = _conditions(status)
    requests = requests or pod_requests(raw)
    owner = _owner(meta)
    reason, code, message = _termination(
        status, containers.ended, conditions.get("DisruptionTarget", {})
    )
    scheduled = conditions.get("PodScheduled", {})
    priority = spec.get("priority")
    unit_requests = gpu_unit_requests(requests)
    return PodRecord(
        uid=str(meta.get("uid") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        node_name=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        gpus=requests.gpu,
        cpu_milli=requests.cpu_milli,
        memory_bytes=requests.memory,
        owner_kind=str(owner.get("kind") or ""),
        owner_name=str(owner.get("name") or ""),
        workload_type=str(pod_labels.get(labels.workload) or ""),
        team=str(pod_labels.get(labels.team) or ""),
        priority_class=str(spec.get("priorityClassName") or ""),
        priority=priority if isinstance(priority, int) else None,
        created_at=parse_time(meta.get("creationTimestamp")) or observed,
        scheduled_at=parse_time(scheduled.get("lastTransitionTime"))
        if scheduled.get("status") == "True"
        else None,
        started_at=_started(status, containers),
        finished_at=_finished(status, containers, conditions.get("Ready", {}), observed),
        terminating_since=_terminating_since(meta),
        termination_reason=reason[:128],
        exit_code=code,
        termination_message=message,
        unschedulable_message=_unschedulable(scheduled),
        waiting_reason=containers.waiting_reason[:128],
        restarts=containers.restarts,
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity=dict(spec.get("affinity") or {}),
        tolerations=list(spec.get("tolerations") or []),
        resource_version=str(meta.get("resourceVersion") or ""),
        units=requests.gpu + sum(unit_requests.values()),
        unit_requests=unit_requests,
        labels={str(k): str(v) for k, v in pod_labels.items()},
        contact=str((meta.get("annotations") or {}).get(labels.contact) or "")[:253],
        reclaim_opt_out=(meta.get("annotations") or {}).get(labels.opt_out) == OPT_OUT_VALUE,
    )
