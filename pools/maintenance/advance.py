"""Maintenance in waves, the worker's side: one step of a maintenance at a time, from what
the database says, so a worker that dies mid-step loses nothing (the next tick takes it up).

A step, for a running maintenance:

- no wave under way: the next wave is the maintenance's nodes left that the pool's headroom
  lets drain together now (budgets read afresh), at most the wave's size; when none may, the
  maintenance waits and says why (a budget, a gang, the floor); when no node is left, it ends;
- a wave draining: each node is cordoned (the record that the cordon is the maintenance's
  goes first) and its GPU pods evicted through the eviction API, so every disruption budget
  is kept by the API server itself; a refused eviction is asked again after its Retry-After
  (or the next tick), and audited once per change of the budget's words. A drain past its
  deadline pauses the maintenance, saying which pods stay;
- a wave drained: held until its step is confirmed or its label says so, then uncordoned
  (only the maintenance's cordons) and the next wave begins.

Ticks come from the beat (MAINTENANCE_TICK_SECONDS) and from each step a person takes; a
lease keeps two workers from advancing the same maintenance at once.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db.models import Q

from pools.audit import audit
from pools.common.events import announce_maintenance_after_commit
from pools.core.headroom import DOWN
from pools.core.snapshot import node_record
from pools.core.waves import CONFIRM, parse_hold_label, wave_limit
from pools.kube import drain
from pools.kube.errors import KubeError, KubeRefused
from pools.kube.nodes import Raw, read_node
from pools.maintenance.headroom import pool_headroom
from pools.models import Maintenance, MaintenanceNode

log = logging.getLogger(__name__)
LEASE_SECONDS = 120
NAMED_BLOCKERS = 3
ROW = MaintenanceNode.State


def maintenances_advance(*, now: datetime) -> list[int]:
    """One step of every running maintenance (the beat's tick); their ids."""
    ids = list(
        Maintenance.objects.filter(state=Maintenance.State.RUNNING).values_list("pk", flat=True)
    )
    for pk in ids:
        maintenance_advance(pk, now=now)
    return ids


def maintenance_advance(maintenance_id: int, *, now: datetime) -> Maintenance | None:
    """One step; None when another worker holds it or it is not running. A Kubernetes error
    leaves it where it stood (logged and recorded as what it waits for): the next tick tries
    again."""
    claimed = Maintenance.objects.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        pk=maintenance_id,
        state=Maintenance.State.RUNNING,
    ).update(lease_until=now + timedelta(seconds=LEASE_SECONDS))
    if not claimed:
        return None
    maintenance = Maintenance.objects.select_related("pool").get(pk=maintenance_id)
    try:
        _step(maintenance, now)
    except KubeError as exc:
        log.warning("maintenance #%s: %s", maintenance_id, exc)
        _wait(maintenance, f"the Kubernetes API: {exc} (tried again at the next tick)")
    finally:
        Maintenance.objects.filter(pk=maintenance_id).update(lease_until=None)
    maintenance.refresh_from_db()
    return maintenance


def _step(maintenance: Maintenance, now: datetime) -> None:
    if maintenance.cancel_requested:
        _wind_down(maintenance, now)
        return
    rows = list(maintenance.nodes.filter(state__in=[ROW.DRAINING, ROW.HELD]).select_related("node"))
    if not rows:
        _next_wave(maintenance, now)
        return
    if any(r.state == ROW.DRAINING for r in rows):
        _drain(maintenance, rows, now)
        return
    if _hold_over(maintenance, rows):
        _release(maintenance, rows, now)
        _next_wave(maintenance, now)


def _wait(maintenance: Maintenance, why: str) -> None:
    why = why[:1000]
    if maintenance.waiting != why:
        maintenance.waiting = why
        Maintenance.objects.filter(pk=maintenance.pk).update(waiting=why)


def _next_wave(maintenance: Maintenance, now: datetime) -> None:
    left = list(maintenance.nodes.filter(state=ROW.WAITING).select_related("node"))
    gone = [r for r in left if r.node.gone_at is not None]
    for row in gone:
        _set(row, state=ROW.LEFT, done_at=now)
        audit(
            "maintenance.node_left",
            node_name=row.node.name,
            maintenance=maintenance,
            message=_of(maintenance, "gone"),
        )
    left = [r for r in left if r.node.gone_at is None]
    if not left:
        _end(maintenance, Maintenance.State.DONE, now, "every node done")
        return
    by_name = {r.node.name: r for r in left}
    found = pool_headroom(maintenance.pool, only=set(by_name), fresh=True)
    if found.budgets_error:
        _wait(maintenance, f"not draining blind: {found.budgets_error}")
        return
    total = maintenance.nodes.count()
    limit = wave_limit(maintenance.wave_size, maintenance.wave_percent, total)
    # A node its operator cordoned before its wave is out of service already: taking it
    # costs the pool nothing, and the eviction API still keeps its pods' budgets.
    cordoned = [
        b.name for b in found.blockers if b.kind == DOWN and b.message.endswith(" cordoned")
    ]
    wave = [by_name[name] for name in [*cordoned, *found.drainable][:limit] if name in by_name]
    if not wave:
        kept = [b.message for b in found.blockers if set(b.nodes) & set(by_name)]
        _wait(maintenance, "no node left can be drained now: " + "; ".join(kept[:NAMED_BLOCKERS]))
        return
    maintenance.wave += 1
    maintenance.wave_started_at = now
    maintenance.waiting = ""
    maintenance.save(update_fields=["wave", "wave_started_at", "waiting"])
    MaintenanceNode.objects.filter(pk__in=[r.pk for r in wave]).update(
        wave=maintenance.wave, state=ROW.DRAINING
    )
    names = [r.node.name for r in wave]
    audit(
        "maintenance.wave_started",
        maintenance=maintenance,
        message=_of(maintenance, f"wave {maintenance.wave}: {', '.join(names)}"),
    )
    for row in wave:
        row.wave, row.state = maintenance.wave, ROW.DRAINING
    _drain(maintenance, wave, now)


def _of(maintenance: Maintenance, what: str) -> str:
    return f"maintenance #{maintenance.pk} of {maintenance.pool.name}: {what}"


def _set(row: MaintenanceNode, **fields: object) -> None:
    for name, value in fields.items():
        setattr(row, name, value)
    MaintenanceNode.objects.filter(pk=row.pk).update(**fields)


def _drain(maintenance: Maintenance, rows: list[MaintenanceNode], now: datetime) -> None:
    staying: list[str] = []
    for row in rows:
        if row.state == ROW.DRAINING:
            staying += _drain_node(maintenance, row, now)
    if not staying:
        return  # the wave is held (and says what for), or a node of it left
    assert maintenance.wave_started_at is not None
    deadline = maintenance.wave_started_at + timedelta(seconds=maintenance.drain_deadline_seconds)
    if now < deadline:
        _wait(maintenance, f"wave {maintenance.wave} draining: {len(staying)} GPU pods left")
        return
    reason = (
        f"the drain of wave {maintenance.wave} passed its deadline of "
        f"{maintenance.drain_deadline_seconds} s with GPU pods still on: {', '.join(staying[:5])}"
        + (f" and {len(staying) - 5} more" if len(staying) > 5 else "")
        + "; resume to try again for another deadline, or cancel"
    )
    if Maintenance.objects.filter(pk=maintenance.pk, state=Maintenance.State.RUNNING).update(
        state=Maintenance.State.PAUSED, paused_reason=reason
    ):
        audit("maintenance.paused", maintenance=maintenance, message=_of(maintenance, reason))
        announce_maintenance_after_commit(maintenance.pk, "paused")


def _drain_node(maintenance: Maintenance, row: MaintenanceNode, now: datetime) -> list[str]:
    """Cordon the node (once), evict its GPU pods; the pods still on it."""
    name = row.node.name
    try:
        raw = read_node(name)
    except KubeRefused as exc:
        if exc.status != 404:
            raise
        _set(row, state=ROW.LEFT, done_at=now)
        audit(
            "maintenance.node_left",
            node_name=name,
            maintenance=maintenance,
            message=_of(maintenance, "node deleted"),
        )
        return []
    _cordon(maintenance, row, raw)
    pods = drain.gpu_pods_on(name)
    if not pods:
        before = None
        if maintenance.hold != CONFIRM:
            key = parse_hold_label(maintenance.hold_label).key
            before = (raw["metadata"].get("labels") or {}).get(key)
        _set(row, state=ROW.HELD, drained_at=now, label_before=before, refusals={})
        audit(
            "node.drained",
            node_name=name,
            maintenance=maintenance,
            message=_of(maintenance, "no GPU pods left"),
        )
        if not maintenance.nodes.filter(wave=maintenance.wave, state=ROW.DRAINING).exists():
            _wave_held(maintenance)
        return []
    _evict(maintenance, row, pods, now)
    return [str(p) for p in pods]


def _cordon(maintenance: Maintenance, row: MaintenanceNode, raw: Raw) -> None:
    name = row.node.name
    if node_record(raw)["unschedulable"]:
        if not row.cordoned_by_portal and not row.operator_cordon:
            _set(row, operator_cordon=True)
            audit(
                "node.already_cordoned",
                node_name=name,
                maintenance=maintenance,
                message=_of(maintenance, "cordoned before its wave: that cordon is left alone"),
            )
        return
    # The record first: a worker that dies between the two still knows the cordon is ours.
    _set(row, cordoned_by_portal=True)
    drain.set_unschedulable(name, True)
    audit(
        "node.cordoned",
        node_name=name,
        maintenance=maintenance,
        message=_of(maintenance, f"wave {row.wave}"),
    )


def _evict(
    maintenance: Maintenance, row: MaintenanceNode, pods: list[drain.PodRef], now: datetime
) -> None:
    refusals = dict(row.refusals)
    for pod in pods:
        key = str(pod)
        earlier = refusals.get(key)
        if pod.terminating or (earlier and now.timestamp() < earlier["next_try"]):
            continue
        refused = drain.evict(pod)
        if refused is None:
            refusals.pop(key, None)
            audit(
                "pod.evicted",
                node_name=row.node.name,
                maintenance=maintenance,
                message=_of(maintenance, key),
            )
            continue
        if earlier is None or earlier["message"] != refused.message:
            audit(
                "pod.eviction_refused",
                node_name=row.node.name,
                maintenance=maintenance,
                message=_of(maintenance, f"{key}: {refused.message}"),
            )
        wait = refused.retry_after if refused.retry_after is not None else 0.0
        refusals[key] = {"message": refused.message, "next_try": now.timestamp() + wait}
    if refusals != row.refusals:
        _set(row, refusals=refusals)


def _wave_held(maintenance: Maintenance) -> None:
    if maintenance.hold == CONFIRM:
        why = f"wave {maintenance.wave} drained: waiting for {maintenance.step!r} to be confirmed"
    else:
        why = f"wave {maintenance.wave} drained: waiting for the label {maintenance.hold_label}"
    _wait(maintenance, why)
    audit("maintenance.wave_held", maintenance=maintenance, message=_of(maintenance, why))
    announce_maintenance_after_commit(maintenance.pk, "held")


def _hold_over(maintenance: Maintenance, rows: list[MaintenanceNode]) -> bool:
    if maintenance.hold == CONFIRM:
        return maintenance.confirmed_wave >= maintenance.wave
    hold = parse_hold_label(maintenance.hold_label)
    missing = []
    for row in rows:
        labels = read_node(row.node.name)["metadata"].get("labels") or {}
        if not hold.satisfied(row.label_before, labels.get(hold.key)):
            missing.append(row.node.name)
    if missing:
        _wait(
            maintenance,
            f"wave {maintenance.wave} drained: waiting for the label {hold} on "
            + ", ".join(missing),
        )
    return not missing


def _release(maintenance: Maintenance, rows: list[MaintenanceNode], now: datetime) -> None:
    for row in rows:
        _uncordon(maintenance, row)
        _set(row, state=ROW.DONE, done_at=now)
    audit(
        "maintenance.wave_done",
        maintenance=maintenance,
        message=_of(maintenance, f"wave {maintenance.wave} done"),
    )


def _uncordon(maintenance: Maintenance, row: MaintenanceNode) -> None:
    if not row.cordoned_by_portal:
        return
    try:
        drain.set_unschedulable(row.node.name, False)
    except KubeRefused as exc:
        if exc.status != 404:
            raise
    _set(row, cordoned_by_portal=False)
    audit(
        "node.uncordoned",
        node_name=row.node.name,
        maintenance=maintenance,
        message=_of(maintenance, "its wave is over"),
    )


def _wind_down(maintenance: Maintenance, now: datetime) -> None:
    """Cancelled: lift the maintenance's cordons from the wave under way; the nodes whose
    wave had not come are left as they are."""
    for row in maintenance.nodes.filter(state__in=[ROW.DRAINING, ROW.HELD]).select_related("node"):
        _uncordon(maintenance, row)
        _set(row, state=ROW.LEFT, done_at=now)
    maintenance.nodes.filter(state=ROW.WAITING).update(state=ROW.LEFT, done_at=now)
    _end(maintenance, Maintenance.State.CANCELLED, now, "cancelled")


def _end(maintenance: Maintenance, state: str, now: datetime, why: str) -> None:
    if Maintenance.objects.filter(pk=maintenance.pk, state=Maintenance.State.RUNNING).update(
        state=state, finished_at=now, waiting="", wave_started_at=None
    ):
        audit(f"maintenance.{state}", maintenance=maintenance, message=_of(maintenance, why))
        announce_maintenance_after_commit(maintenance.pk, state)
