"""Will this manifest, or this Pending pod, land — and if not, why? The one function the fit
page and `POST /api/v1/fit/` call (`fit_check_run`). It reads; it writes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from pools.common.errors import Refused
from pools.core.fit.check import check_fit
from pools.core.fit.findings import ManifestError
from pools.core.fit.verdicts import FitReport
from pools.core.fit.workloads import read_manifest, read_objects
from pools.fit.cluster import FitCluster, fit_cluster
from pools.models import GpuPod


class InvalidFitInput(Refused):
    """The input cannot be checked: `fields` names each field and why (400)."""

    status = 400


@dataclass(frozen=True)
class PodName:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class FitCheck:
    report: FitReport
    cluster: FitCluster
    manifest: str  # the text checked (for a pod: the pod as the inventory holds it, as YAML)
    format: str  # "yaml" or "json": the fixes are written in the same
    pod: GpuPod | None = None

    def as_dict(self) -> dict[str, Any]:
        body = self.report.as_dict()
        body["pod"] = str(self.pod) if self.pod else None
        body["pools"] = sorted(self.cluster.pools)
        return body


def fit_check_run(*, manifest: str | None = None, pod: PodName | None = None) -> FitCheck:
    """Check a manifest (YAML or JSON text) or a pod the inventory holds against every pool."""
    if (manifest is None) == (pod is None):
        raise InvalidFitInput(
            "fit_input",
            "Give either a manifest or a pod.",
            {"non_field_errors": ["Give either a manifest or a pod, not both or neither."]},
        )
    row = None
    if pod is not None:
        row = _pod_row(pod)
        manifest = yaml.safe_dump(pod_manifest(row), sort_keys=False)
    assert manifest is not None
    try:
        documents = read_manifest(manifest) if row is None else read_objects([pod_manifest(row)])
    except ManifestError as error:
        raise InvalidFitInput(
            "invalid_manifest",
            str(error),
            {"manifest": [p["text"] for p in error.as_list()], "problems": error.as_list()},
        ) from None
    claims = any(t.shape.claims for w in documents.workloads for t in w.templates)
    cluster = fit_cluster(dra=claims)
    report = check_fit(
        documents,
        cluster.snapshot,
        pool_key=cluster.pool_key,
        priority_classes=cluster.priority_classes,
    )
    return FitCheck(report, cluster, manifest, documents.format, row)


def _pod_row(ref: PodName) -> GpuPod:
    row = GpuPod.objects.live().filter(namespace=ref.namespace, name=ref.name).first()
    if row is None:
        raise InvalidFitInput(
            "unknown_pod",
            f"No live GPU pod {ref} in the inventory.",
            {"pod": [f"No live GPU pod {ref} in the inventory."]},
        )
    return row


def pod_manifest(pod: GpuPod) -> dict[str, Any]:
    """The pod as the inventory holds it: its requests and its scheduling block."""
    requests: dict[str, str] = {}
    if pod.cpu_milli:
        requests["cpu"] = f"{pod.cpu_milli}m"
    if pod.memory_bytes:
        requests["memory"] = str(pod.memory_bytes)
    resources: dict[str, Any] = {}
    limits = {name: str(n) for name, n in (pod.unit_requests or {}).items()}
    if pod.gpus:
        limits["nvidia.com/gpu"] = str(pod.gpus)
    if limits:
        # Extended resources are asked for in limits; the requests equal them.
        requests.update(limits)
        resources["limits"] = dict(sorted(limits.items()))
    if requests:
        resources["requests"] = requests
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": resources}]}
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.affinity:
        spec["affinity"] = pod.affinity
    if pod.tolerations:
        spec["tolerations"] = list(pod.tolerations)
    if pod.priority_class:
        spec["priorityClassName"] = pod.priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
        "spec": spec,
    }
