"""A reclaim's request, the people's part: once the grace is over, someone who may ask for
moves files the prefilled request (its evidence in its reason), and someone else who may
approve moves approves it (four eyes) or rejects it, saying why. Pages, the API and scripts
call these; every step is audited. Nothing is evicted before an approval.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from pools.audit import audit
from pools.common.errors import InvalidInput, NotAllowed, Refused
from pools.common.events import announce_reclaim_after_commit
from pools.common.roles import Capability, has_capability, refusal_reason
from pools.models import FREE_TEXT_MAX_LENGTH, GpuPod, Reclaim, ReclaimPolicy

STATE = Reclaim.State


def _need(user: AbstractBaseUser, capability: Capability, doing: str) -> None:
    if not has_capability(user, capability):
        raise NotAllowed("forbidden", f"You may not {doing}. {refusal_reason(capability)}")


def _locked(reclaim_id: int, states: Sequence[str], doing: str) -> Reclaim:
    reclaim = Reclaim.objects.select_for_update().select_related("pool").get(pk=reclaim_id)
    if reclaim.state not in states or reclaim.finished_at is not None:
        raise Refused(
            "state_conflict",
            f"Cannot {doing} reclaim #{reclaim_id}: it is {reclaim.get_state_display()}"
            + (f" ({reclaim.outcome})" if reclaim.outcome else "")
            + ".",
        )
    return reclaim


def _text(reason: str, *, required: bool) -> str:
    text = reason.strip()
    if required and not text:
        raise InvalidInput("validation", "Say why.", {"reason": "Required."})
    if len(text) > FREE_TEXT_MAX_LENGTH:
        message = f"At most {FREE_TEXT_MAX_LENGTH} characters."
        raise InvalidInput("validation", message, {"reason": message})
    return text


def _still_reclaimable(reclaim: Reclaim) -> None:
    """409 when what was true at the notice no longer is: the pod opted out or moved to
    another pool, the pool was retired or its policy turned off (the sweep ends it soon)."""
    name = f"{reclaim.namespace}/{reclaim.pod}"
    pod = GpuPod.objects.live().filter(uid=reclaim.pod_uid).first()
    if pod is not None and pod.reclaim_opt_out:
        raise Refused("opted_out", f"{name} is now annotated never to be reclaimed.")
    pool = reclaim.pool
    if pod is not None and pod.pool_label != pool.name:
        where = pod.pool_label or "of unassigned nodes"
        raise Refused("not_reclaimable", f"{name} now runs in the pool {where}, not {pool.name}.")
    if (
        pool.retired_at is not None
        or not ReclaimPolicy.objects.filter(pool=pool, enabled=True).exists()
    ):
        raise Refused(
            "not_reclaimable",
            f"The pool {pool.name} has no reclaim policy on now: nothing is reclaimed there.",
        )


def reclaim_request(
    reclaim_id: int, *, user: AbstractBaseUser, reason: str = "", now: datetime
) -> Reclaim:
    """File the prefilled request of a due reclaim; a blank reason keeps the prefilled one."""
    _need(user, Capability.REQUEST_MOVE, "file reclaim requests")
    text = _text(reason, required=False)
    with transaction.atomic():
        reclaim = _locked(reclaim_id, [STATE.DUE], "file")
        Reclaim.objects.filter(pk=reclaim_id).update(
            state=STATE.REQUESTED,
            requested_by=user,
            requested_at=now,
            reason=text or reclaim.reason,
        )
        audit(
            "reclaim.requested",
            actor=user,
            reclaim=reclaim,
            node_name=reclaim.node_name,
            message=text or reclaim.reason,
        )
        announce_reclaim_after_commit(reclaim_id, "requested")
    reclaim.refresh_from_db()
    return reclaim


def reclaim_approve(
    reclaim_id: int, *, approver: AbstractBaseUser, reason: str = "", now: datetime
) -> Reclaim:
    """Someone other than its filer approves: the worker evicts the pod at once, through the
    eviction API, until RECLAIM_EVICT_DEADLINE_SECONDS."""
    _need(approver, Capability.APPROVE_MOVE, "approve reclaims")
    text = _text(reason, required=False)
    with transaction.atomic():
        reclaim = _locked(reclaim_id, [STATE.REQUESTED], "approve")
        if reclaim.requested_by_id == approver.pk:
            raise NotAllowed("self_approval", "Four eyes: you cannot approve your own request.")
        _still_reclaimable(reclaim)
        deadline = now + timedelta(seconds=settings.RECLAIM_EVICT_DEADLINE_SECONDS)
        Reclaim.objects.filter(pk=reclaim_id).update(
            state=STATE.APPROVED,
            decided_by=approver,
            decided_at=now,
            decision_reason=text,
            evict_deadline=deadline,
            next_try_at=None,
        )
        audit(
            "reclaim.approved",
            actor=approver,
            reclaim=reclaim,
            node_name=reclaim.node_name,
            message=text or "approved",
        )
        announce_reclaim_after_commit(reclaim_id, "approved")
        announce_reclaim_after_commit(reclaim_id)
    reclaim.refresh_from_db()
    return reclaim


def reclaim_reject(
    reclaim_id: int, *, approver: AbstractBaseUser, reason: str, now: datetime
) -> Reclaim:
    """Keep the pod: before or after its request is filed. It is noticed again only once it
    has worked and idled again."""
    _need(approver, Capability.APPROVE_MOVE, "reject reclaims")
    text = _text(reason, required=True)
    with transaction.atomic():
        reclaim = _locked(reclaim_id, [STATE.NOTICED, STATE.DUE, STATE.REQUESTED], "reject")
        Reclaim.objects.filter(pk=reclaim_id).update(
            state=STATE.REJECTED, decided_by=approver, decided_at=now, decision_reason=text
        )
        audit(
            "reclaim.rejected",
            actor=approver,
            reclaim=reclaim,
            node_name=reclaim.node_name,
            message=text,
        )
        announce_reclaim_after_commit(reclaim_id, "rejected")
    reclaim.refresh_from_db()
    return reclaim
