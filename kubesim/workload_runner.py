"""Runs the workload model (`kubesim.workload`) in a cluster, on the cluster's clock.

Jobs arrive as Pod objects created through the cluster (`Cluster.create_pod`), so kubesim's
own scheduler binds them or leaves them Pending with PodScheduled=False and a
FailedScheduling event in its own words; a pod bound later (when GPUs free up) starts then.
Each pod ends as its job was drawn to end (see `kubesim.workload`), its status written as
the kubelet writes it, and finished pods stay as objects for `retention` seconds (as a Job's
`ttlSecondsAfterFinished` keeps them), so a LIST or a WATCH sees the history.

Everything happens on clock timers: at real speed, faster (`--clock-scale`), or all at once
(`Timers.run_until`, as `POST /kubesim/clock {"advance": s}` and the start-up history do),
each timer firing at its own simulated time. The same seed gives the same jobs, names,
nodes and endings.

`records` keeps one `PodRecord` a pod (created, scheduled, started, finished, node, GPU
slots, outcome, reasons) — what a watcher keeping pod history would have seen — and `xids`
the GPU faults raised; `kubesim.backfill` turns both into DCGM samples.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from kubesim import workload
from kubesim.cluster import Cluster, GpuOverride
from kubesim.errors import ApiError
from kubesim.events import NORMAL, WARNING, reference
from kubesim.scheduling import node_gpus
from kubesim.store import Entry, key_of
from kubesim.workload import Job, JobClass

BACKOFF_AFTER = 15.0  # the kubelet's first image pull retry fails into ImagePullBackOff
XID_BEFORE_END = 5.0  # the XID shows this long before the process dies of it
PREEMPTION_GRACE = 30.0  # the victim's terminationGracePeriodSeconds


@dataclass(slots=True)
class PodRecord:
    namespace: str
    name: str
    job_class: str
    team: str
    workload_type: str
    gpus: int
    load: str
    outcome: str
    created: float
    uid: str = ""
    scheduled: float | None = None
    started: float | None = None
    finished: float | None = None
    deleted: float | None = None
    node: str = ""
    slots: tuple[int, ...] = ()
    phase: str = "Pending"
    reason: str = ""  # the container's (or, when set, the pod's) terminal reason
    waiting_reason: str = ""
    exit_code: int | None = None
    xid: int = 0
    xid_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["slots"] = list(self.slots)
        return data


@dataclass(frozen=True, slots=True)
class XidRecord:
    node: str
    slot: int
    at: float
    xid: int


class WorkloadRunner:
    def __init__(
        self,
        cluster: Cluster,
        classes: tuple[JobClass, ...] | list[JobClass],
        *,
        seed: int = 0,
        retention: float = 7 * 86400.0,
        window: float = 86400.0,
    ) -> None:
        self.cluster = cluster
        self.classes = {c.name: c for c in classes}
        self.seed = seed
        self.retention = retention
        self.window = window
        self.records: dict[str, PodRecord] = {}
        self.xids: list[XidRecord] = []
        self._plans: dict[str, tuple[JobClass, Job]] = {}  # live pods: key -> its job
        cluster.store.listeners.append(self._observe)
        cluster.start_hooks.append(self._start_hook)

    @property
    def _now(self) -> float:
        return self.cluster.store.clock.now()

    def _at(self, when: float, callback: Any, *args: Any) -> None:
        self.cluster.timers.at(when, functools.partial(callback, *args))

    def start(self, at: float) -> None:
        """Jobs arrive from `at` on, planned a window (a day) at a time. Windows sit on a
        fixed grid (UTC days), so a seed gives the same jobs on the same days whenever the
        cluster started."""
        grid = at - at % self.window
        self._at(at, self._plan, grid, at)

    def _plan(self, start: float, since: float) -> None:
        end = start + self.window
        for job_class in self.classes.values():
            for job in workload.plan_window(job_class, self.seed, start, end):
                if job.arrival >= since:
                    self._at(job.arrival, self._arrive, job_class, job)
        self._at(end, self._plan, end, end)

    # --- arrival ---
    def _arrive(self, job_class: JobClass, job: Job) -> None:
        for index in range(job_class.gang):
            pod = workload.pod_manifest(job_class, job, index)
            if job_class.intrude_on:
                node = self._intrusion_node(job_class.intrude_on, job)
                if node is None:
                    continue
                pod["spec"]["nodeName"] = node
            meta = pod["metadata"]
            key = key_of(meta["namespace"], meta["name"])
            self._plans[key] = (job_class, job)
            self.records[key] = PodRecord(
                namespace=meta["namespace"],
                name=meta["name"],
                job_class=job_class.name,
                team=job_class.team,
                workload_type=job_class.workload_type,
                gpus=job_class.gpus,
                load=job_class.load,
                outcome=job.outcome,
                created=self._now,
            )
            try:
                stored = self.cluster.create_pod(pod)
            except ApiError:
                self._plans.pop(key, None)
                self.records.pop(key, None)
                continue
            self.records[key].uid = stored.obj["metadata"]["uid"]

    def _intrusion_node(self, pool: str, job: Job) -> str | None:
        nodes = sorted(
            name
            for name, found in self.cluster.store.objects["nodes"].items()
            if (found.obj["metadata"].get("labels") or {}).get("gpu-pool") == pool
        )
        if not nodes:
            return None
        digest = hashlib.sha256(job.name.encode()).digest()
        return nodes[int.from_bytes(digest[:4], "big") % len(nodes)]

    # --- the cluster tells: bound, deleted ---
    def _observe(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        if resource != "pods":
            return
        meta = new.obj["metadata"]
        key = key_of(meta.get("namespace"), meta["name"])
        if key not in self._plans:
            return
        if type_ == "DELETED":
            self._plans.pop(key, None)
            record = self.records.get(key)
            if record is not None:
                record.deleted = self._now
                if record.finished is None:
                    record.finished, record.phase, record.reason = self._now, "Failed", "Deleted"
            return
        node = (new.obj.get("spec") or {}).get("nodeName")
        had = old is not None and (old.obj.get("spec") or {}).get("nodeName")
        if node and not had:
            # A listener must not write: the start follows on the clock, right now.
            self._at(self._now, self._bound, key, meta.get("uid"))

    def _start_hook(self, pod: dict[str, Any], running: dict[str, Any]) -> dict[str, Any] | None:
        meta = pod["metadata"]
        plan = self._plans.get(key_of(meta.get("namespace"), meta["name"]))
        if plan is None or plan[1].outcome not in workload.NEVER_STARTS:
            return None
        job_class, job = plan
        if job.outcome == workload.IMAGE_PULL:
            reason, message = "ErrImagePull", workload.image_pull_message(job_class.image_ref)
        else:
            reason, message = "CreateContainerConfigError", workload.config_error_message(job)
        now = self.cluster.store.clock.rfc3339()
        return workload.waiting_status(pod, running, reason, message, now)

    def _current(self, key: str, uid: str | None) -> Entry | None:
        found = self.cluster.store.objects["pods"].get(key)
        if found is None or found.obj["metadata"].get("uid") != uid or key not in self._plans:
            return None
        return found

    # --- running ---
    def _bound(self, key: str, uid: str | None) -> None:
        found = self._current(key, uid)
        if found is None:
            return
        job_class, job = self._plans[key]
        record = self.records[key]
        now = self._now
        record.scheduled, record.node = now, found.obj["spec"]["nodeName"]
        record.slots = self._slots(record.node, key)
        if job.outcome in workload.NEVER_STARTS:
            self._cannot_start(found, job_class, job, record)
            self._at(now + job_class.deadline, self._end, key, uid)
            return
        record.started, record.phase = now, "Running"
        ends = now + job.ends_after
        if job.outcome == workload.GPU_FAULT:
            self._at(max(now, ends - XID_BEFORE_END), self._gpu_fault, key, uid)
        if job.outcome == workload.PREEMPTED:
            self._at(ends, self._preempt, key, uid)
            return
        self._at(ends, self._end, key, uid)

    def _slots(self, node: str, key: str) -> tuple[int, ...]:
        found = self.cluster.store.objects["nodes"].get(node)
        if found is None:
            return ()
        holders = self.cluster.gpu_holders(node, node_gpus(found.obj))
        return tuple(
            index
            for index, holder in enumerate(holders)
            if holder is not None
            and key_of(holder.obj["metadata"].get("namespace"), holder.obj["metadata"]["name"])
            == key
        )

    def _cannot_start(self, found: Entry, job_class: JobClass, job: Job, record: PodRecord) -> None:
        pod, node = found.obj, record.node
        ref = _container_ref(pod)
        recorder = self.cluster.recorder
        if job.outcome == workload.IMAGE_PULL:
            record.waiting_reason = "ErrImagePull"
            image = job_class.image_ref
            failure = workload.image_pull_message(image)
            recorder.kubelet_event(node, ref, NORMAL, "Pulling", f'Pulling image "{image}"')
            recorder.kubelet_event(
                node, ref, WARNING, "Failed", f'Failed to pull image "{image}": {failure}'
            )
            recorder.kubelet_event(node, ref, WARNING, "Failed", "Error: ErrImagePull")
            key = key_of(pod["metadata"]["namespace"], pod["metadata"]["name"])
            self._at(self._now + BACKOFF_AFTER, self._back_off, key, pod["metadata"]["uid"])
        else:
            record.waiting_reason = "CreateContainerConfigError"
            message = workload.config_error_message(job)
            recorder.kubelet_event(node, ref, WARNING, "Failed", f"Error: {message}")

    def _back_off(self, key: str, uid: str) -> None:
        found = self._current(key, uid)
        if found is None or found.obj["status"].get("phase") != "Pending":
            return
        job_class, _job = self._plans[key]
        image = job_class.image_ref
        now = self.cluster.store.clock.rfc3339()
        pod = found.obj
        status = workload.waiting_status(
            pod, pod["status"], "ImagePullBackOff", workload.backoff_message(image), now
        )
        self.cluster.store.replace("pods", {**pod, "status": status}, expected_rv=None)
        self.records[key].waiting_reason = "ImagePullBackOff"
        node, ref = pod["spec"]["nodeName"], _container_ref(pod)
        recorder = self.cluster.recorder
        recorder.kubelet_event(node, ref, NORMAL, "BackOff", workload.backoff_message(image))
        recorder.kubelet_event(node, ref, WARNING, "Failed", "Error: ImagePullBackOff")

    def _gpu_fault(self, key: str, uid: str) -> None:
        if self._current(key, uid) is None:
            return
        _job_class, job = self._plans[key]
        record = self.records[key]
        if not record.slots:
            return
        slot = record.slots[0]
        override = self.cluster.gpu_overrides.setdefault((record.node, slot), GpuOverride())
        override.xid = job.xid
        record.xid, record.xid_at = job.xid, self._now
        self.xids.append(XidRecord(record.node, slot, self._now, job.xid))

    def _preempt(self, key: str, uid: str) -> None:
        """The scheduler's preemption of the pod: its DisruptionTarget condition and event,
        then the kubelet stops it within its grace period."""
        found = self._current(key, uid)
        if found is None:
            return
        pod = found.obj
        now = self.cluster.store.clock.rfc3339()
        condition = workload.disruption_condition(
            "PreemptionByScheduler", workload.PREEMPTION_MESSAGE, now
        )
        status = dict(pod["status"])
        status["conditions"] = [*(status.get("conditions") or []), condition]
        self.cluster.store.replace("pods", {**pod, "status": status}, expected_rv=None)
        preemptor = hashlib.sha256(f"preemptor/{key}".encode()).hexdigest()
        note = (
            f"Preempted by pod {preemptor[:8]}-{preemptor[8:12]}-{preemptor[12:16]}-"
            f"{preemptor[16:20]}-{preemptor[20:32]} on node {pod['spec']['nodeName']}"
        )
        self.cluster.recorder.scheduler_event(pod, NORMAL, "Preempted", "Preempting", note)
        self._at(self._now + PREEMPTION_GRACE, self._end, key, uid)

    # --- the end ---
    def _end(self, key: str, uid: str) -> None:
        found = self._current(key, uid)
        if found is None or found.obj["status"].get("phase") in ("Succeeded", "Failed"):
            return
        job_class, job = self._plans[key]
        pod = found.obj
        ending = workload.ending_for(job_class, job, pod["metadata"]["name"])
        now = self.cluster.store.clock.rfc3339()
        status = workload.terminal_status(pod, pod["status"], ending, now)
        self.cluster.store.replace("pods", {**pod, "status": status}, expected_rv=None)
        if job.outcome == workload.EVICTED:
            self.cluster.recorder.kubelet_event(
                pod["spec"]["nodeName"], _ref(pod), WARNING, "Evicted", ending.pod_message
            )
        record = self.records[key]
        record.finished, record.phase = self._now, status["phase"]
        record.reason, record.exit_code = ending.pod_reason or ending.reason, ending.exit_code
        self._at(self._now + self.retention, self._expire, key, uid)
        self.cluster.schedule_pending()  # its GPUs are free: the scheduler retries at once

    def _expire(self, key: str, uid: str) -> None:
        """The TTL-after-finished controller removes the finished pod."""
        found = self._current(key, uid)
        if found is None:
            return
        meta = found.obj["metadata"]
        self.cluster.store.delete("pods", meta["namespace"], meta["name"])

    # --- reading ---
    def history(self) -> list[dict[str, Any]]:
        return [record.as_dict() for record in self.records.values()]

    def describe(self) -> dict[str, Any]:
        phases: dict[str, int] = {}
        for record in self.records.values():
            phases[record.phase] = phases.get(record.phase, 0) + 1
        return {
            "seed": self.seed,
            "retention": self.retention,
            "classes": sorted(self.classes),
            "pods": len(self.records),
            "phases": phases,
            "xids": len(self.xids),
        }


def _ref(pod: dict[str, Any], field_path: str = "") -> dict[str, Any]:
    return reference(pod, field_path)


def _container_ref(pod: dict[str, Any]) -> dict[str, Any]:
    name = pod["spec"]["containers"][0].get("name", "")
    return _ref(pod, f"spec.containers{{{name}}}")
