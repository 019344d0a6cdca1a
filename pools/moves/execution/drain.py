"""Drain-first, the database side: cordon (recording that the portal did), evict the GPU
pods until none is left or the deadline passes (renewing the node's lease on every poll),
and uncordon only what the portal cordoned.

An operator's cordon is theirs: a node already cordoned before the move stays cordoned
after it. The record that the portal cordoned is written before the cordon is sent, so a
worker that resumes the node after a crash knows whose cordon it finds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from pools.audit import audit
from pools.common.errors import DrainDeadlinePassed
from pools.core.checks import max_drain_seconds
from pools.core.snapshot import node_record
from pools.kube import drain
from pools.kube.errors import KubeError
from pools.kube.nodes import Raw
from pools.models import MoveItem
from pools.moves.execution.outcome import DrainHooks, NodeWork
from pools.moves.execution.reconfigure import mig_config_applied, plugin_config_applied

# How long after its grace period a pod may take to disappear (the kubelet's final delete).
TERMINATION_SLACK_SECONDS = 10


class ItemLeaseLost(Exception):
    """The node's lease ran out and another worker claimed it: this one stops at once."""


@dataclass
class Cordon:
    """Whether the portal's cordon is on the node now (so a failure lifts it), and the
    uncordon's event, recorded after the node's own (the timeline reads in the order things
    happened: the PATCH, then the uncordon)."""

    on: bool = False
    later: list[str] = field(default_factory=list)


def _renew_lease(item: MoveItem) -> None:
    # The claim is the item's attempt count: a renewal only holds while no one claimed since.
    lease = timezone.now() + timedelta(seconds=settings.MOVE_LEASE_SECONDS)
    if not MoveItem.objects.filter(
        pk=item.pk, state=MoveItem.State.RUNNING, attempts=item.attempts
    ).update(lease_until=lease):
        raise ItemLeaseLost(f"{item.node.name}: another worker holds the node now")


def _set_portal_cordon(item: MoveItem, cordon: Cordon, value: bool) -> None:
    MoveItem.objects.filter(pk=item.pk).update(cordoned_by_portal=value)
    cordon.on = value


def drain_hooks(item: MoveItem) -> tuple[DrainHooks, Cordon]:
    """The hooks node_outcome calls for a drain-first node, and its cordon's state."""
    cordon = Cordon(on=item.cordoned_by_portal)
    name, request = item.node.name, item.request

    def cordon_node(work: NodeWork, raw: Raw) -> None:
        if cordon.on:
            return  # ours, from an earlier attempt
        if node_record(raw)["unschedulable"]:
            audit(
                "node.already_cordoned",
                request=request,
                node_name=name,
                message="cordoned before the move: the portal leaves that cordon alone",
            )
            return
        _set_portal_cordon(item, cordon, True)  # first the record, then the cordon
        drain.set_unschedulable(name, True)
        audit("node.cordoned", request=request, node_name=name, message="drain-first: cordoned")

    def empty(work: NodeWork, raw: Raw) -> None:
        drain_node(item)

    def uncordon(work: NodeWork, raw: Raw) -> Raw:
        if not cordon.on:
            return raw
        raw = drain.set_unschedulable(name, False)
        _set_portal_cordon(item, cordon, False)
        cordon.later.append("node.uncordoned")
        return raw

    settle = None
    if request.kind == request.Kind.RECONFIGURE:

        def settle(work: NodeWork, raw: Raw) -> Raw:
            applied = plugin_config_applied if request.plugin_config else mig_config_applied
            return applied(item, raw, renew=lambda: _renew_lease(item))

    return DrainHooks(cordon_node, empty, uncordon, settle), cordon


def drain_node(item: MoveItem) -> None:
    """Evict the GPU pods (a disruption budget may refuse, and is asked again) until none is
    left or the deadline passes; the lease is renewed on every poll."""
    request, name = item.request, item.node.name
    started = time.monotonic()
    deadline = started + request.drain_deadline_seconds
    # Past this the task itself would be stopped: a drain never outlives its task.
    hard_stop = started + max_drain_seconds(settings.CELERY_TASK_SOFT_TIME_LIMIT)
    evictions = _Evictions(item)
    while True:
        _renew_lease(item)
        pods = drain.gpu_pods_on(name)
        evictions.forget_gone(pods)
        if not pods:
            audit(
                "node.drained",
                request=request,
                node_name=name,
                message="no GPU pods left on the node",
            )
            return
        evictions.ask(pods, time.monotonic())
        _check_drain_deadline(item, pods, evictions.leaving, deadline, hard_stop)
        time.sleep(settings.DRAIN_POLL_SECONDS)


# A pod a disruption budget keeps is asked again after the 429's Retry-After or, when the
# server sent none (a budget with no disruption allowed, the usual case), after a delay
# that doubles from one poll; never after more than this, so a budget that frees up is
# seen soon, and never sooner than the next poll.
EVICTION_RETRY_MAX_SECONDS = 30.0


@dataclass
class Refusal:
    """A pod whose eviction was refused: the server's words, when to ask again, and the
    delay that led there (doubled on the next refusal without a Retry-After)."""

    message: str
    next_try: float
    delay: float


def eviction_delay(earlier: Refusal | None, retry_after: float | None, poll: float) -> float:
    if retry_after is not None:
        wanted = retry_after
    else:
        wanted = earlier.delay * 2 if earlier is not None else poll
    return min(EVICTION_RETRY_MAX_SECONDS, max(poll, wanted))


@dataclass
class _Evictions:
    """One drain's evictions. The audit log gets a row per change of state, not per poll:
    a pod evicted, a refusal (again only when the server's words change), and a refused pod
    leaving by other means."""

    item: MoveItem
    # Pod -> when it must be gone: an evicted pod stays listed while it terminates, for up
    # to its grace period. It is leaving: never evicted twice, and not held against the
    # deadline while its grace period runs.
    leaving: dict[str, float] = field(default_factory=dict)
    refused: dict[str, Refusal] = field(default_factory=dict)

    def ask(self, pods: list[drain.PodRef], now: float) -> None:
        for pod in pods:
            key = str(pod)
            if key in self.leaving:
                continue
            if pod.terminating:
                self._left(key, "terminating, though its eviction was refused")
                self.leaving[key] = now + pod.grace_seconds
                continue
            earlier = self.refused.get(key)
            if earlier is not None and now < earlier.next_try:
                continue
            refusal = drain.evict(pod)
            if refusal is None:
                self.refused.pop(key, None)
                self.leaving[key] = now + pod.grace_seconds
                self._audit("pod.evicted", key)
                continue
            if earlier is None or earlier.message != refusal.message:
                self._audit("pod.eviction_refused", f"{key}: {refusal.message}")
            delay = eviction_delay(earlier, refusal.retry_after, settings.DRAIN_POLL_SECONDS)
            self.refused[key] = Refusal(refusal.message, now + delay, delay)

    def forget_gone(self, pods: list[drain.PodRef]) -> None:
        listed = {str(p) for p in pods}
        for key in [k for k in self.refused if k not in listed]:
            self._left(key, "gone from the node, though its eviction was refused")

    def _left(self, key: str, how: str) -> None:
        if self.refused.pop(key, None) is not None:
            self._audit("pod.left", f"{key}: {how}")

    def _audit(self, action: str, message: str) -> None:
        audit(action, request=self.item.request, node_name=self.item.node.name, message=message)


def _check_drain_deadline(
    item: MoveItem,
    pods: list[drain.PodRef],
    leaving: dict[str, float],
    deadline: float,
    hard_stop: float,
) -> None:
    now = time.monotonic()
    if now < deadline:
        return
    # A terminating pod is given its grace period (and the kubelet a moment to report it
    # gone) even past the drain deadline: it leaves whatever the move does. Not past the
    # task's own time limit, though.
    slack = settings.DRAIN_POLL_SECONDS + TERMINATION_SLACK_SECONDS
    stuck = [
        p for p in pods if str(p) not in leaving or now > leaving[str(p)] + slack or now > hard_stop
    ]
    if stuck:
        left = ", ".join(str(p) for p in stuck)
        raise DrainDeadlinePassed(
            f"drain deadline of {item.request.drain_deadline_seconds}s passed with "
            f"GPU pods still on the node: {left}"
        )


def uncordon_after_failure(item: MoveItem, cordoned: bool) -> None:
    if not cordoned:
        return
    try:
        drain.set_unschedulable(item.node.name, False)
        MoveItem.objects.filter(pk=item.pk).update(cordoned_by_portal=False)
        audit(
            "node.uncordoned",
            request=item.request,
            node_name=item.node.name,
            message="after a failed drain-first move",
        )
    except KubeError as exc:
        audit(
            "node.uncordon_failed",
            request=item.request,
            node_name=item.node.name,
            message=f"the node is still cordoned: {exc}",
        )
