"""Failure reasons (pure): why GPU pods ended badly, kept apart so sharing is not blamed for
everything: out of memory, a GPU or driver fault, an image problem, an eviction or
preemption, or something else."""

from __future__ import annotations

import bisect
import enum
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pools.core.insights.records import DAY, PodRecord, Window


class Cause(enum.StrEnum):
    OOM = "oom"
    GPU_FAULT = "gpu_fault"
    IMAGE = "image"
    EVICTION = "eviction"
    OTHER = "other"


CAUSE_TITLES = {
    Cause.OOM: "out of memory",
    Cause.GPU_FAULT: "GPU or driver fault",
    Cause.IMAGE: "image problem",
    Cause.EVICTION: "eviction or preemption",
    Cause.OTHER: "other",
}

IMAGE_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "CreateContainerConfigError",
        "InvalidImageName",
        "ErrImageNeverPull",
    }
)
# The pod's reason, or its DisruptionTarget condition's (Kubernetes 1.26 on).
EVICTION_REASONS = frozenset(
    {
        "Evicted",
        "Preempted",
        "Preempting",
        "PreemptionByScheduler",
        "PreemptionByKubeScheduler",
        "EvictionByEvictionAPI",
        "DeletionByTaintManager",
        "TerminationByKubelet",
        "NodeShutdown",
        "Shutdown",
    }
)
# CUDA's own wording (runtime, PyTorch, TensorFlow) for a framebuffer allocation that failed.
_CUDA_OOM = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY|OutOfMemoryError"
    r"|RESOURCE_EXHAUSTED: OOM",
    re.IGNORECASE,
)
# What the driver and the device plugin say when the GPU, not the job, failed.
_GPU_FAULT = re.compile(
    r"\bXid\b|NVRM|fallen off the bus|uncorrectable ECC|CUDA_ERROR_ECC_UNCORRECTABLE"
    r"|device plugin|UnexpectedAdmissionError|nvidia-container-cli|NVML",
    re.IGNORECASE,
)


def failed(pod: PodRecord) -> bool:
    """Whether the pod ended badly (or cannot start because of its image)."""
    return (
        pod.phase == "Failed"
        or (pod.exit_code is not None and pod.exit_code != 0)
        or pod.reason in EVICTION_REASONS
        or _image_problem(pod)
    )


def _image_problem(pod: PodRecord) -> bool:
    # A container that waited on its image and then ran got over it.
    return (pod.waiting_reason in IMAGE_REASONS and pod.started is None) or (
        pod.reason in IMAGE_REASONS
    )


def classify(pod: PodRecord, *, xid_during_run: bool = False) -> Cause:
    """The failure's cause. An image problem stops the container before it runs, so it comes
    first; the kernel's OOMKilled or CUDA's own message wins over a coincident XID (the job
    asked for too much); then a GPU fault; then an eviction."""
    if _image_problem(pod):
        return Cause.IMAGE
    if pod.reason == "OOMKilled" or _CUDA_OOM.search(pod.message):
        return Cause.OOM
    if xid_during_run or _GPU_FAULT.search(pod.message) or _GPU_FAULT.search(pod.reason):
        return Cause.GPU_FAULT
    if pod.reason in EVICTION_REASONS:
        return Cause.EVICTION
    return Cause.OTHER


def xid_during_run(
    pod: PodRecord, xid_times: Mapping[str, Sequence[float]], step: float = 0.0
) -> bool:
    """Whether the pod's node reported a new XID error while the pod ran (`xid_times`: each
    node's sorted times by which a new error had appeared, at most `step` seconds after it
    did). An XID kills its job within seconds, so the error often shows only after the pod
    ended: a run that ended within the step before a new error counts."""
    times = xid_times.get(pod.node)
    if not times or pod.started is None:
        return False
    end = pod.finished if pod.finished is not None else float("inf")
    i = bisect.bisect_left(times, pod.started)
    return i < len(times) and times[i] - step <= end


@dataclass(frozen=True)
class FailureExample:
    pod: str
    node: str
    reason: str
    message: str
    at: float | None


@dataclass(frozen=True)
class FailureReport:
    total: int = 0
    pods: int = 0  # GPU pods that ended (or failed to start) in the window
    counts: Mapping[Cause, int] = field(default_factory=dict)
    # One row per bucket (a day for a 7-day window, a week otherwise): counts by cause.
    trend: list[tuple[float, Mapping[Cause, int]]] = field(default_factory=list)
    examples: Mapping[Cause, list[FailureExample]] = field(default_factory=dict)

    def share(self, cause: Cause) -> float:
        return self.counts.get(cause, 0) / self.total if self.total else 0.0

    @property
    def main_cause(self) -> Cause | None:
        if not self.total:
            return None
        return max(Cause, key=lambda c: (self.counts.get(c, 0), c == Cause.OTHER))


def _bucket_seconds(window: Window) -> float:
    return DAY if window.days <= 7 else 7 * DAY


def failure_report(
    pods: Iterable[PodRecord],
    window: Window,
    *,
    xid_times: Mapping[str, Sequence[float]] | None = None,
    xid_step: float = 0.0,
    examples_per_cause: int = 5,
) -> FailureReport:
    """Failures among the pods that ended (or were created, for image problems) in the
    window, counted by cause, with a trend and the latest examples of each cause."""
    step = _bucket_seconds(window)
    buckets = max(1, int(-(-window.seconds // step)))
    trend = [Counter[Cause]() for _ in range(buckets)]
    counts: Counter[Cause] = Counter()
    examples: dict[Cause, list[FailureExample]] = {c: [] for c in Cause}
    ended = 0
    for pod in pods:
        at = pod.finished if pod.finished is not None else pod.created
        if not window.contains(at):
            continue
        ended += 1
        if not failed(pod):
            continue
        xid = xid_during_run(pod, xid_times or {}, xid_step)
        cause = classify(pod, xid_during_run=xid)
        counts[cause] += 1
        trend[min(buckets - 1, int((at - window.start) // step))][cause] += 1
        examples[cause].append(
            FailureExample(
                pod.key, pod.node, pod.reason or pod.waiting_reason, pod.message[:200], at
            )
        )
    latest = {
        c: sorted(found, key=lambda e: e.at or 0.0, reverse=True)[:examples_per_cause]
        for c, found in examples.items()
    }
    return FailureReport(
        total=sum(counts.values()),
        pods=ended,
        counts={c: counts.get(c, 0) for c in Cause},
        trend=[(window.start + i * step, dict(b)) for i, b in enumerate(trend)],
        examples=latest,
    )
