"""Failure reasons (pure): why GPU pods ended badly, kept apart so sharing is not blamed for
everything. The seed's classes: out of memory, a GPU or driver fault, an image problem, plain
lack of resources, an eviction or preemption, a timeout, or something else.

The one classifier: the insights, the advisor (which reads the insights) and the workload
profiles all count failures through `failures_in`, so they agree on every count."""

from __future__ import annotations

import bisect
import enum
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pools.core.insights.records import DAY, HistoryPod, Window


class Cause(enum.StrEnum):
    OOM = "oom"
    GPU_FAULT = "gpu_fault"
    IMAGE = "image"
    RESOURCES = "resources"
    EVICTION = "eviction"
    TIMEOUT = "timeout"
    OTHER = "other"


CAUSE_TITLES = {
    Cause.OOM: "out of memory",
    Cause.GPU_FAULT: "GPU or driver fault",
    Cause.IMAGE: "image problem",
    Cause.RESOURCES: "lack of resources",
    Cause.EVICTION: "eviction or preemption",
    Cause.TIMEOUT: "timeout",
    Cause.OTHER: "other",
}
# What puts a failure in each class, as an operator would recognise it.
CAUSE_SIGNS = {
    Cause.OOM: "OOMKilled by the kernel; CUDA out of memory",
    Cause.GPU_FAULT: (
        "an XID error on the node while the pod ran; CUDA errors; NVRM, NVML, ECC or device "
        "plugin errors; \u201cCUDA driver version is insufficient\u201d"
    ),
    Cause.IMAGE: "ErrImagePull, ImagePullBackOff, InvalidImageName, CreateContainerConfigError",
    Cause.RESOURCES: (
        "rejected by the kubelet for want of a resource: OutOfnvidia.com/gpu, OutOfcpu, OutOfmemory"
    ),
    Cause.EVICTION: "Evicted; preempted by the scheduler; the taint manager; a node shutdown",
    Cause.TIMEOUT: "DeadlineExceeded: the pod's or its Job's activeDeadlineSeconds ran out",
    Cause.OTHER: "a non-zero exit with none of the signs above",
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
    r"|device plugin|UnexpectedAdmissionError|nvidia-container-cli|NVML"
    # The CUDA runtime's own report of a device or driver failure (its out-of-memory error,
    # matched above, is the job's own doing); a driver older than the CUDA runtime.
    r"|CUDA error|CUDA_ERROR_|cudaError|CUDA driver version is insufficient"
    r"|driver/library version mismatch|no CUDA-capable device",
    re.IGNORECASE,
)
# The kubelet's admission refusal names the resource it lacked: OutOfnvidia.com/gpu, ...
_LACK_OF_RESOURCES = re.compile(r"^OutOf\S+$")
TIMEOUT_REASONS = frozenset({"DeadlineExceeded"})


def failed(pod: HistoryPod) -> bool:
    """Whether the pod ended badly (or cannot start because of its image)."""
    return (
        pod.phase == "Failed"
        or (pod.exit_code is not None and pod.exit_code != 0)
        or pod.reason in EVICTION_REASONS
        or _image_problem(pod)
    )


def cause_breakdown(counts: Mapping[Cause, int]) -> str:
    """The non-zero counts in the classes' order, titled: "GPU or driver fault 16 · timeout
    14"; every view that states them says them so."""
    return " · ".join(f"{CAUSE_TITLES[c]} {counts[c]}" for c in Cause if counts.get(c))


def _image_problem(pod: HistoryPod) -> bool:
    # A container that waited on its image and then ran got over it.
    return (pod.waiting_reason in IMAGE_REASONS and pod.started is None) or (
        pod.reason in IMAGE_REASONS
    )


def classify(pod: HistoryPod, *, xid_during_run: bool = False) -> Cause:
    """The failure's cause. An image problem or the kubelet's refusal stops the pod before
    it runs, so they come first; the kernel's OOMKilled or CUDA's own message wins over a
    coincident XID (the job asked for too much); then a GPU or driver fault; then an
    eviction; then a deadline that ran out."""
    if _image_problem(pod):
        return Cause.IMAGE
    if _LACK_OF_RESOURCES.match(pod.reason):
        return Cause.RESOURCES
    if pod.reason == "OOMKilled" or _CUDA_OOM.search(pod.message):
        return Cause.OOM
    if xid_during_run or _GPU_FAULT.search(pod.message) or _GPU_FAULT.search(pod.reason):
        return Cause.GPU_FAULT
    if pod.reason in EVICTION_REASONS:
        return Cause.EVICTION
    if pod.reason in TIMEOUT_REASONS:
        return Cause.TIMEOUT
    return Cause.OTHER


def ended_at(pod: HistoryPod) -> float:
    """When the pod's outcome is known: when it ended, or (an image that never came) when it
    was created."""
    return pod.finished if pod.finished is not None else pod.created


@dataclass(frozen=True)
class XidErrors:
    """Each node's sorted times by which a new XID error had appeared, at most `step`
    seconds after it did (pools.metrics.insights.xid_times)."""

    times: Mapping[str, Sequence[float]] = field(default_factory=dict)
    step: float = 0.0


def failures_in(
    pods: Iterable[HistoryPod], window: Window, xids: XidErrors | None = None
) -> Iterator[tuple[HistoryPod, Cause]]:
    """Each pod that failed within the window (by ended_at), with its cause: the one
    classifier every view counts with."""
    xids = xids or XidErrors()
    for pod in pods:
        if window.contains(ended_at(pod)) and failed(pod):
            yield pod, classify(pod, xid_during_run=xid_during_run(pod, xids.times, xids.step))


def xid_during_run(
    pod: HistoryPod, xid_times: Mapping[str, Sequence[float]], step: float = 0.0
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
    pods: Iterable[HistoryPod],
    window: Window,
    *,
    xids: XidErrors | None = None,
    examples_per_cause: int = 5,
) -> FailureReport:
    """Failures among the pods that ended (or were created, for image problems) in the
    window, counted by cause, with a trend and the latest examples of each cause."""
    step = _bucket_seconds(window)
    buckets = max(1, int(-(-window.seconds // step)))
    trend = [Counter[Cause]() for _ in range(buckets)]
    counts: Counter[Cause] = Counter()
    examples: dict[Cause, list[FailureExample]] = {c: [] for c in Cause}
    pods = list(pods)
    ended = sum(1 for pod in pods if window.contains(ended_at(pod)))
    for pod, cause in failures_in(pods, window, xids):
        at = ended_at(pod)
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
