"""Maintenance in waves, the workflow: start one, confirm a wave's step, pause, resume,
cancel. Pool admins only, like drills: a maintenance changes no pool's members and drains
only within the pool's headroom, so it needs no second approver. Every step is audited.

Nothing here talks to Kubernetes (the web has no rights on nodes): each step is recorded and
the worker (pools.maintenance.advance) acts on it, at once when the broker is up and at the
beat's next tick otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from pools.audit import audit
from pools.common.errors import InvalidInput, NotAllowed, Refused
from pools.common.events import announce_maintenance_after_commit
from pools.common.roles import Capability, has_capability
from pools.core.waves import CONFIRM, WavesAsked, waves_problems
from pools.models import Drill, Maintenance, MaintenanceNode, MoveItem, Node, Pool


def can_maintain(user: AbstractBaseUser) -> bool:
    """Who starts and steers maintenances: pool admins. Pages, API and workflow ask here."""
    return has_capability(user, Capability.EDIT_POOLS)


def _allowed(user: AbstractBaseUser) -> None:
    if not can_maintain(user):
        raise NotAllowed("forbidden", "Only pool admins run maintenances.")


def _busy(names: Sequence[str]) -> dict[str, str]:
    """What already holds each node: an active move or a running drill."""
    busy = {
        name: f"already has an active move (#{request})"
        for name, request in MoveItem.objects.filter(active=True, node__name__in=names).values_list(
            "node__name", "request_id"
        )
    }
    for name, drill in Drill.objects.filter(
        state__in=Drill.ACTIVE_STATES, node_name__in=names
    ).values_list("node_name", "pk"):
        busy.setdefault(name, f"is in drill #{drill}")
    return busy


def _chosen_nodes(pool: Pool, names: Sequence[str] | None, count: int | None) -> list[Node]:
    present = list(Node.objects.present().filter(pool=pool).order_by("name"))
    if names:
        return [n for n in present if n.name in set(names)]
    return present[:count] if count is not None else present


def _problems(
    pool: Pool,
    chosen: list[Node],
    nodes: Sequence[str] | None,
    count: int | None,
    asked: dict[str, Any],
) -> dict[str, str]:
    known = {n.name for n in chosen}
    problems = waves_problems(
        WavesAsked(
            nodes_in_pool=Node.objects.present().filter(pool=pool).count(),
            nodes=count if count is not None and not nodes else len(chosen),
            counted=count is not None and not nodes,
            unknown_nodes=tuple(sorted(set(nodes or ()) - known)),
            busy_nodes=_busy(sorted(known)),
            **{k: v for k, v in asked.items() if k != "reason"},
        )
    )
    if not asked["reason"].strip():
        problems["reason"] = "Say why (the upgrade, the ticket): it goes in the audit log."
    return problems


def maintenance_start(
    *,
    pool: Pool,
    user: AbstractBaseUser,
    reason: str,
    wave_size: int,
    wave_percent: bool = False,
    hold: str = CONFIRM,
    hold_label: str = "",
    step: str = "",
    drain_deadline_seconds: int = 1800,
    nodes: Sequence[str] | None = None,
    count: int | None = None,
) -> Maintenance:
    """Record a maintenance of `nodes` of the pool (or its first `count` by name, or all) and
    announce it. Nothing is written when the input is refused (400, naming each field) or
    another maintenance of the pool is active (409)."""
    _allowed(user)
    chosen = _chosen_nodes(pool, nodes, count)
    asked = {
        "reason": reason,
        "wave_size": wave_size,
        "wave_percent": wave_percent,
        "hold": hold,
        "hold_label": hold_label.strip() if hold != CONFIRM else "",
        "step": step.strip(),
        "drain_deadline_seconds": drain_deadline_seconds,
    }
    if problems := _problems(pool, chosen, nodes, count, asked):
        raise InvalidInput("validation", " ".join(problems.values()), problems)
    try:
        with transaction.atomic():
            maintenance = Maintenance.objects.create(
                pool=pool, started_by=user, **{**asked, "reason": reason.strip()}
            )
            MaintenanceNode.objects.bulk_create(
                MaintenanceNode(maintenance=maintenance, node=n) for n in chosen
            )
            audit(
                "maintenance.started",
                actor=user,
                maintenance=maintenance,
                message=f"maintenance #{maintenance.pk} of {pool.name}: {len(chosen)} nodes in "
                f"waves of at most {wave_size}{' %' if wave_percent else ''}, "
                f"held {_hold_text(maintenance)}: {maintenance.reason}",
            )
            announce_maintenance_after_commit(maintenance.pk)
    except IntegrityError:
        raise Refused(
            "maintenance_running", f"A maintenance of pool {pool.name} is already under way."
        ) from None
    return maintenance


def _hold_text(maintenance: Maintenance) -> str:
    if maintenance.hold == CONFIRM:
        return f"until an operator confirms {maintenance.step!r}"
    return f"until the label {maintenance.hold_label} says so"


def _active(maintenance_id: int) -> Maintenance:
    maintenance = Maintenance.objects.select_for_update().get(pk=maintenance_id)
    if maintenance.state not in Maintenance.ACTIVE_STATES:
        raise Refused("maintenance_ended", f"Maintenance #{maintenance_id} is {maintenance.state}.")
    return maintenance


def maintenance_confirm(maintenance_id: int, *, wave: int, user: AbstractBaseUser) -> Maintenance:
    """The operator says the step is done for `wave` (named, so a confirmation sent for a
    wave that is already over is refused as stale instead of releasing the next one)."""
    _allowed(user)
    with transaction.atomic():
        maintenance = _active(maintenance_id)
        if maintenance.hold != CONFIRM:
            raise Refused(
                "not_confirmable",
                f"Maintenance #{maintenance_id} waits for the label {maintenance.hold_label}, "
                "not for a confirmation.",
            )
        held = maintenance.nodes.filter(wave=wave, state=MaintenanceNode.State.HELD)
        draining = maintenance.nodes.filter(wave=wave, state=MaintenanceNode.State.DRAINING)
        if wave != maintenance.wave or not held.exists() or draining.exists():
            raise Refused(
                "stale_wave",
                f"Wave {wave} of maintenance #{maintenance_id} is not waiting for its step "
                f"(the maintenance is at wave {maintenance.wave}"
                + (", still draining)." if draining.exists() else ")."),
                {"wave": "Not the wave waiting for its step."},
            )
        maintenance.confirmed_wave = wave
        maintenance.save(update_fields=["confirmed_wave"])
        audit(
            "maintenance.confirmed",
            actor=user,
            maintenance=maintenance,
            message=f"maintenance #{maintenance_id}, wave {wave}: {maintenance.step}",
        )
        announce_maintenance_after_commit(maintenance_id)
    return maintenance


def maintenance_pause(
    maintenance_id: int, *, user: AbstractBaseUser, reason: str = ""
) -> Maintenance:
    """Stop where it stands: no eviction, cordon or uncordon until resumed. The nodes of the
    wave under way stay cordoned."""
    _allowed(user)
    with transaction.atomic():
        maintenance = _active(maintenance_id)
        if maintenance.state == Maintenance.State.PAUSED:
            raise Refused("already_paused", f"Maintenance #{maintenance_id} is already paused.")
        maintenance.state = Maintenance.State.PAUSED
        maintenance.paused_reason = reason.strip() or f"paused by {user.get_username()}"
        maintenance.save(update_fields=["state", "paused_reason"])
        audit(
            "maintenance.paused",
            actor=user,
            maintenance=maintenance,
            message=f"maintenance #{maintenance_id}: {maintenance.paused_reason}",
        )
    return maintenance


def maintenance_resume(
    maintenance_id: int, *, user: AbstractBaseUser, now: datetime
) -> Maintenance:
    """Go on from where it stopped; a drain under way gets its whole deadline again."""
    _allowed(user)
    with transaction.atomic():
        maintenance = _active(maintenance_id)
        if maintenance.state != Maintenance.State.PAUSED:
            raise Refused("not_paused", f"Maintenance #{maintenance_id} is not paused.")
        maintenance.state = Maintenance.State.RUNNING
        maintenance.paused_reason = ""
        if maintenance.wave_started_at is not None:
            maintenance.wave_started_at = now
        maintenance.save(update_fields=["state", "paused_reason", "wave_started_at"])
        audit(
            "maintenance.resumed",
            actor=user,
            maintenance=maintenance,
            message=f"maintenance #{maintenance_id}",
        )
        announce_maintenance_after_commit(maintenance_id)
    return maintenance


def maintenance_cancel(maintenance_id: int, *, user: AbstractBaseUser) -> Maintenance:
    """End it early: the worker lifts the maintenance's cordons from the wave under way (an
    operator's own cordon stays) and the nodes whose wave had not come are left alone."""
    _allowed(user)
    with transaction.atomic():
        maintenance = _active(maintenance_id)
        maintenance.state = Maintenance.State.RUNNING
        maintenance.paused_reason = ""
        maintenance.cancel_requested = True
        maintenance.save(update_fields=["state", "paused_reason", "cancel_requested"])
        audit(
            "maintenance.cancel_requested",
            actor=user,
            maintenance=maintenance,
            message=f"maintenance #{maintenance_id}",
        )
        announce_maintenance_after_commit(maintenance_id)
    return maintenance
