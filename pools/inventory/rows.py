"""Rows from API objects, and the bulk writes both the full sync and the watcher make.

Every write here is one SQL statement whatever the number of rows (updates over a set of
keys; upserts as one prepared `INSERT ... ON CONFLICT DO UPDATE` sent with `executemany`),
so a flush costs the same number of statements for 10 changes as for 5,000.

The upserts bypass `bulk_create`: at 100,000 pods its per-field SQL compilation cost more
than the whole rest of a sync (1 ms a row), and SQLite's bound on variables split it into
a statement per 27 rows. The statement is built once per model from its fields, each
value adapted by the field's own database preparation, so it writes what the ORM would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.db.models import OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from pools.core.desired import PoolSpec, drift_record
from pools.core.fit.resources import Resources
from pools.core.pod_record import PodLabels, PodRecord, pod_record
from pools.core.snapshot import NodeSnapshot, PodSummary
from pools.inventory.version import inventory_version_bump
from pools.models import GpuPod, MoveItem, Node, Pool

Raw = dict[str, Any]

# pool_label is where the pod ran when it was bound: set when the row is made, then only
# filled in once (gpu_pods_pool_fill), never rewritten by a later move of the node.
KEPT = ("pool_label",)
# The waiting reason is kept when a later status has none: a container that never started
# (its image could not be pulled) ends with the pod's deadline, and its last status no
# longer says why.
KEPT_UNLESS_EMPTY = ("waiting_reason",)


def pod_labels() -> PodLabels:
    return PodLabels(workload=settings.POD_WORKLOAD_LABEL, team=settings.POD_TEAM_LABEL)


def active_pools() -> tuple[list[PoolSpec], dict[str, int]]:
    pools = list(Pool.objects.active())
    return [p.spec() for p in pools], {p.name: p.pk for p in pools}


def build_node(
    snapshot: NodeSnapshot,
    pods: Iterable[PodSummary],
    pools: Sequence[PoolSpec],
    pool_ids: dict[str, int],
    seen_at: object,
) -> Node:
    """The node's row. `pods`: the pods bound to it; finished ones (Succeeded, Failed) hold
    nothing and are left out."""
    pod_list = sorted(
        (p for p in pods if not p.finished), key=lambda p: (-p.gpus, p.namespace, p.name)
    )
    label = snapshot.labels.get(settings.POOL_LABEL_KEY, "")
    node_drift = drift_record(
        snapshot.labels,
        snapshot.taints,
        pools,
        known_pools=pool_ids.keys(),
        pool_key=settings.POOL_LABEL_KEY,
    )
    return Node(
        name=snapshot.name,
        pool_id=pool_ids.get(label),
        pool_label=label,
        gpu_model=snapshot.gpu_model,
        gpu_count=snapshot.gpu_count,
        gpu_memory_mib=snapshot.gpu_memory_mib,
        gpu_allocatable=snapshot.gpu_allocatable,
        gpu_allocated=sum(p.gpus for p in pod_list),
        cpu_allocatable=snapshot.cpu_allocatable,
        memory_allocatable=snapshot.memory_allocatable,
        cpu_allocatable_milli=snapshot.cpu_allocatable_milli,
        memory_allocatable_bytes=snapshot.memory_allocatable_bytes,
        cpu_capacity_milli=snapshot.cpu_capacity_milli,
        memory_capacity_bytes=snapshot.memory_capacity_bytes,
        pods_allocatable=snapshot.pods_allocatable,
        cpu_requested_milli=sum(p.cpu_milli for p in pod_list),
        memory_requested_bytes=sum(p.memory_bytes for p in pod_list),
        ready=snapshot.ready,
        cordoned=snapshot.cordoned,
        labels=dict(snapshot.labels),
        taints=snapshot.taints,
        drifted=bool(node_drift),
        drift=node_drift,
        pods=[p.as_dict() for p in pod_list],
        resource_version=snapshot.resource_version,
        last_seen=seen_at,
        gone_at=None,
    )


def _adapter(field: models.Field[Any, Any]) -> Callable[[Any], Any] | None:
    if isinstance(field, models.JSONField):
        return lambda value: field.get_db_prep_save(value, connection)
    if isinstance(field, models.DateTimeField):
        return connection.ops.adapt_datetimefield_value
    return None


@cache
def _upsert_statement(
    model: type[models.Model],
    unique: str,
    keep: tuple[str, ...],
    keep_unless_empty: tuple[str, ...],
    vendor: str,
) -> tuple[str, list[str], list[Callable[[Any], Any] | None]]:
    """The upsert of `model` keyed on `unique`, updating every field but `keep` on conflict
    (and `keep_unless_empty` when the new value is ''); the attribute names it reads and
    each one's adapter, in column order."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = [quote(f.column) for f in fields]

    def update(column: str, name: str) -> str:
        if name in keep_unless_empty:
            return f"{column} = COALESCE(NULLIF(EXCLUDED.{column}, ''), {table}.{column})"
        return f"{column} = EXCLUDED.{column}"

    updates = ", ".join(
        update(quote(f.column), f.name) for f in fields if f.name != unique and f.name not in keep
    )
    # Identifiers from the model's own metadata, quoted; every value is a parameter.
    head = f"INSERT INTO {table} ({', '.join(columns)})"
    values = f"VALUES ({', '.join(['%s'] * len(columns))})"
    conflict = f"ON CONFLICT ({quote(unique)}) DO UPDATE SET {updates}"
    sql = f"{head} {values} {conflict}"
    return sql, [f.attname for f in fields], [_adapter(f) for f in fields]


def upsert(
    model: type[models.Model],
    rows: Iterable[dict[str, Any]],
    *,
    unique: str,
    keep: tuple[str, ...] = (),
    keep_unless_empty: tuple[str, ...] = (),
) -> int:
    """Insert or update `rows` (attribute name -> value) in one statement."""
    sql, names, adapters = _upsert_statement(
        model, unique, keep, keep_unless_empty, connection.vendor
    )
    params = [
        [
            value if adapt is None or value is None else adapt(value)
            for adapt, value in zip(adapters, (row[name] for name in names), strict=True)
        ]
        for row in rows
    ]
    if params:
        with connection.cursor() as cursor:
            cursor.executemany(sql, params)
    return len(params)


def node_values(node: Node) -> dict[str, Any]:
    return {f.attname: getattr(node, f.attname) for f in Node._meta.concrete_fields}


def nodes_upsert(rows: list[Node]) -> None:
    if upsert(Node, (node_values(n) for n in rows), unique="name"):
        inventory_version_bump()


def nodes_mark_gone(nodes: QuerySet[Node], at: datetime) -> int:
    """Mark the present nodes of `nodes` gone (one statement); how many were."""
    gone = nodes.filter(gone_at__isnull=True).update(gone_at=at)
    if gone:
        inventory_version_bump()
    return gone


def gpu_pod_values(record: PodRecord, pool_label: str, now: datetime) -> dict[str, Any]:
    """A GpuPod row's values (attribute names), for `gpu_pods_upsert`."""
    values = {name: getattr(record, name) for name in PodRecord.__dataclass_fields__}
    return {**values, "pool_label": pool_label, "deleted_at": None, "updated_at": now}


def gpu_pod_from_raw(
    raw: Raw,
    requests: Resources,
    *,
    labels: PodLabels,
    node_pools: dict[str, str],
    observed: datetime,
) -> dict[str, Any]:
    """A GPU pod's row values; `node_pools` maps node names to their pool label now (the
    pool the pod is bound in, when its row is new)."""
    record = pod_record(raw, labels=labels, observed=observed, requests=requests)
    # A pod first seen finished may have run before its node's last move: its row is made
    # without a pool, and gpu_pods_pool_fill places it knowing the moves.
    pool = "" if record.finished_at is not None else node_pools.get(record.node_name, "")
    return gpu_pod_values(record, pool, observed)


def gpu_pods_upsert(rows: list[dict[str, Any]], now: datetime | None = None) -> datetime:
    """Write GPU pod rows; pool_label is kept on conflict: where the pod was bound. Returns
    the rows' updated_at."""
    stamp = now or timezone.now()
    upsert(
        GpuPod,
        ({**row, "updated_at": stamp} for row in rows),
        unique="uid",
        keep=KEPT,
        keep_unless_empty=KEPT_UNLESS_EMPTY,
    )
    return stamp


def gpu_pods_pool_fill(*, written_since: datetime) -> int:
    """Bound pods without a pool label get the one their node carried when they were bound
    (one statement): the source of the first move that changed the node after the binding,
    else the node's label now. Pods first seen after they finished are placed too: the
    history from before the portal watched, and jobs shorter than the time between two
    syncs, belong to their pools' insights. Only rows written since `written_since` (the
    ones just listed or watched): a pod on an unassigned node stays without a pool, and
    looking at it again on every write would cost more as the history grows."""
    moved_after = (
        MoveItem.objects.filter(
            node__name=OuterRef("node_name"),
            state=MoveItem.State.DONE,
            finished_at__gt=OuterRef("scheduled_at"),
        )
        .order_by("finished_at")
        .values("source_label")[:1]
    )
    node_label = Node.objects.filter(name=OuterRef("node_name")).values("pool_label")[:1]
    return (
        GpuPod.objects.filter(pool_label="", deleted_at__isnull=True, updated_at__gte=written_since)
        .exclude(node_name="")
        .update(pool_label=Coalesce(Subquery(moved_after), Subquery(node_label), Value("")))
    )


def gpu_pods_unseen_deleted(seen_since: datetime, at: datetime) -> int:
    """After a full listing that rewrote every pod row it saw: the rest were deleted."""
    return GpuPod.objects.filter(deleted_at__isnull=True, updated_at__lt=seen_since).update(
        deleted_at=at
    )


def gpu_pods_purge(now: datetime) -> int:
    """Forget pods deleted more than POD_HISTORY_DAYS ago."""
    cutoff = now - timedelta(days=settings.POD_HISTORY_DAYS)
    deleted, _ = GpuPod.objects.filter(Q(deleted_at__lt=cutoff)).delete()
    return deleted


def is_gpu_pod(requests: Resources) -> bool:
    return requests.gpu > 0
