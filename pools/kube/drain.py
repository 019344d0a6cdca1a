"""Cordon, uncordon and evicting a node's GPU pods through the eviction API.

Eviction (not deletion) lets the API server enforce PodDisruptionBudgets: a pod whose budget
allows no disruption is answered 429 and stays; the drain waits and asks again until its
deadline. An evicted pod is not gone: it terminates (`metadata.deletionTimestamp` set) for
its grace period — `terminationGracePeriodSeconds`, 30 s by default, minutes for a training
job that checkpoints — and is listed on its node until then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pools.common import observability
from pools.core.snapshot import pod_units
from pools.kube.nodes import Raw, core_api, pod_pages
from pools.kube.retry import RetryPolicy, retry_after_seconds
from pools.kube.session import node_session


def set_unschedulable(name: str, value: bool) -> Raw:
    """Cordon or uncordon: the same strategic-merge patch `kubectl cordon` sends."""
    policy = RetryPolicy()
    body = {"spec": {"unschedulable": True if value else None}}
    return policy.call(
        lambda: observability.kube_patch_sent(node_session().patch, name, body),
        doing=f"{'cordoning' if value else 'uncordoning'} node {name}",
    )


DEFAULT_GRACE_SECONDS = 30


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    units: int  # the GPU units it holds: whole GPUs, MIG instances, shares
    terminating: bool = False  # already leaving: evicting it again would change nothing
    grace_seconds: int = DEFAULT_GRACE_SECONDS  # how long it may take to leave once asked

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_ref(raw: Raw) -> PodRef:
    meta, spec = raw["metadata"], raw.get("spec") or {}
    terminating = bool(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds") if terminating else None
    if grace is None:
        grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    return PodRef(
        str(meta["namespace"]),
        str(meta["name"]),
        pod_units(raw),
        terminating=terminating,
        grace_seconds=int(grace),
    )


def gpu_pods_on(node: str) -> list[PodRef]:
    """The pods a drain evicts: those holding GPU units (whole GPUs, MIG instances,
    shares), except DaemonSet pods (as `kubectl drain --ignore-daemonsets` leaves them):
    their controller would put them back at once, and the device plugin and dcgm-exporter
    must stay on the node anyway."""
    return [
        pod_ref(p)
        for page in pod_pages(node_name=node)
        for p in page
        if pod_units(p) > 0 and not _daemon_pod(p)
    ]


def _daemon_pod(raw: Raw) -> bool:
    return any(
        owner.get("controller") and owner.get("kind") == "DaemonSet"
        for owner in (raw.get("metadata") or {}).get("ownerReferences") or []
    )


@dataclass(frozen=True)
class EvictionRefused:
    """A disruption budget refused an eviction (429): the server's words, and the seconds its
    Retry-After asks to wait (None when it sent none, as for a budget with no disruption
    allowed)."""

    message: str
    retry_after: float | None = None


def evict(pod: PodRef) -> EvictionRefused | None:
    """Ask the API server to evict `pod`. None when accepted (or already gone); otherwise why
    it refused (a disruption budget), to try again later."""
    policy = RetryPolicy()
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.name, namespace=pod.namespace))

    def send() -> EvictionRefused | None:
        try:
            core_api().create_namespaced_pod_eviction(
                pod.name, pod.namespace, body, _request_timeout=settings.KUBE_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 429 and "disruption budget" in (exc.body or ""):
                return EvictionRefused(_refusal_message(exc.body), retry_after_seconds(exc))
            raise
        return None

    return policy.call(send, doing=f"evicting pod {pod}")


EVICTED, GONE = "evicted", "gone"


def evict_exact(namespace: str, name: str, uid: str) -> str | EvictionRefused:
    """Evict the pod of that uid, and no other: a pod made again under its name (its
    controller's) fails the uid precondition (409). EVICTED; GONE when it no longer exists
    (404, or 409 for another uid); or the disruption budget's refusal."""
    policy = RetryPolicy()
    body = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        delete_options=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)),
    )

    def send() -> str | EvictionRefused:
        try:
            core_api().create_namespaced_pod_eviction(
                name, namespace, body, _request_timeout=settings.KUBE_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404 or (exc.status == 409 and "UID" in (exc.body or "")):
                return GONE
            if exc.status == 429 and "disruption budget" in (exc.body or ""):
                return EvictionRefused(_refusal_message(exc.body), retry_after_seconds(exc))
            if exc.status == 409:  # the pod changed under the eviction: asked again later
                return EvictionRefused(_refusal_message(exc.body))
            raise
        return EVICTED

    return policy.call(send, doing=f"evicting pod {namespace}/{name}")


def _refusal_message(body: str | None) -> str:
    """The Status's message and its causes' ("…needs 2 healthy pods and has 2 currently"):
    the causes say which budget refuses, and change when its pods' health does."""
    try:
        status = json.loads(body or "{}")
    except ValueError:
        status = {}
    status = status if isinstance(status, dict) else {}
    causes = (status.get("details") or {}).get("causes") or []
    words = [str(status.get("message") or "disruption budget")]
    words += [str(c["message"]) for c in causes if isinstance(c, dict) and c.get("message")]
    return " ".join(words)
