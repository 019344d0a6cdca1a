"""Rows from API objects, and the bulk writes both the full sync and the watcher make.

Every write here is one SQL statement whatever the number of rows (updates over a set of
keys; upserts as one prepared `INSERT ... ON CONFLICT DO UPDATE` sent with `executemany`),
so a flush costs the same number of statements for 10 changes as for 5,000.

The upserts bypass `bulk_create`: at 100,000 pods its per-field SQL compilation cost more
than the whole rest of a sync (1 ms a row), and SQLite's bound on variables split it into
a statement per 27 rows. The statement is built once per model from its fields, each
value adapted as the field's own database preparation does, so it writes what the ORM
would (tests/inventory/test_inventory_rows.py compares them).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from pools.common.cluster_access import pool_label_key
from pools.core.desired import PoolSpec, drift_record
from pools.core.devices import devices_record
from pools.core.pod_record import PodLabels
from pools.core.snapshot import NodeSnapshot, PodSummary
from pools.core.sqlite_values import SqliteRow, json_text, sqlite_datetime
from pools.inventory.version import inventory_version_bump
from pools.membership.stays import stays_follow
from pools.models import GpuPod, MoveItem, Node, Pool, current_cluster

Raw = dict[str, Any]

# pool_label is where the pod ran when it was bound: set when the row is made, then only
# filled in once (gpu_pods_pool_fill), never rewritten by a later move of the node.
KEPT = ("pool_label",)
# A node's DRA units are the DRA listing's (pools.inventory.dra): a write of the node from
# the Node object leaves them as they are.
NODE_KEPT = ("dra_units",)
# The waiting reason is kept when a later status has none: a container that never started
# (its image could not be pulled) ends with the pod's deadline, and its last status no
# longer says why.
KEPT_UNLESS_EMPTY = ("waiting_reason",)
# A node is its name in its cluster (pools.models.Node's constraint).
NODE_KEY = ("cluster", "name")


def pod_labels() -> PodLabels:
    return PodLabels(
        workload=settings.POD_WORKLOAD_LABEL,
        team=settings.POD_TEAM_LABEL,
        contact=settings.RECLAIM_CONTACT_ANNOTATION,
        opt_out=settings.RECLAIM_OPT_OUT_ANNOTATION,
    )


def active_pools() -> tuple[list[PoolSpec], dict[str, int]]:
    pools = list(Pool.objects.active())
    return [p.spec() for p in pools], {p.name: p.pk for p in pools}


# The columns a node's pods make: all a flush writes when only the pods changed.
POD_COLUMNS = (
    "gpu_allocated",
    "cpu_requested_milli",
    "memory_requested_bytes",
    "resources_requested",
    "pods",
)


def node_pod_columns(pods: Iterable[PodSummary]) -> dict[str, Any]:
    """The node's figures made of `pods`, the pods bound to it; finished ones (Succeeded,
    Failed) hold nothing and are left out."""
    pod_list = sorted(
        (p for p in pods if not p.finished), key=lambda p: (-p.gpus, p.namespace, p.name)
    )
    requested: dict[str, int] = {}
    for pod in pod_list:
        for name, amount in pod.extended:
            requested[name] = requested.get(name, 0) + amount
    return {
        "gpu_allocated": sum(p.gpus for p in pod_list),
        "cpu_requested_milli": sum(p.cpu_milli for p in pod_list),
        "memory_requested_bytes": sum(p.memory_bytes for p in pod_list),
        "resources_requested": dict(sorted(requested.items())),
        "pods": [p.as_dict() for p in pod_list],
    }


def node_row(
    snapshot: NodeSnapshot,
    pods: Iterable[PodSummary],
    pools: Sequence[PoolSpec],
    pool_ids: dict[str, int],
    seen_at: object,
) -> dict[str, Any]:
    """The node's row as attribute names and values (every column but the id)."""
    pool_key = pool_label_key()
    label = snapshot.labels.get(pool_key, "")
    node_drift = drift_record(
        snapshot.labels,
        snapshot.taints,
        pools,
        known_pools=pool_ids.keys(),
        pool_key=pool_key,
    )
    return {
        "cluster": current_cluster(),
        "name": snapshot.name,
        "pool_id": pool_ids.get(label),
        "pool_label": label,
        "gpu_model": snapshot.gpu_model,
        "gpu_count": snapshot.gpu_count,
        "gpu_memory_mib": snapshot.gpu_memory_mib,
        "gpu_allocatable": snapshot.gpu_allocatable,
        "cpu_allocatable": snapshot.cpu_allocatable,
        "memory_allocatable": snapshot.memory_allocatable,
        "cpu_allocatable_milli": snapshot.cpu_allocatable_milli,
        "memory_allocatable_bytes": snapshot.memory_allocatable_bytes,
        "cpu_capacity_milli": snapshot.cpu_capacity_milli,
        "memory_capacity_bytes": snapshot.memory_capacity_bytes,
        "pods_allocatable": snapshot.pods_allocatable,
        "resources": dict(sorted(snapshot.resources.items())),
        "devices": devices_record(snapshot.devices) if snapshot.devices else {},
        "dra_units": [],  # a new node's; an existing node's are kept (NODE_KEPT)
        "ready": snapshot.ready,
        "cordoned": snapshot.cordoned,
        "labels": dict(snapshot.labels),
        "taints": snapshot.taints,
        "drifted": bool(node_drift),
        "drift": node_drift,
        "resource_version": snapshot.resource_version,
        "last_seen": seen_at,
        "gone_at": None,
        **node_pod_columns(pods),
    }


def build_node(
    snapshot: NodeSnapshot,
    pods: Iterable[PodSummary],
    pools: Sequence[PoolSpec],
    pool_ids: dict[str, int],
    seen_at: object,
) -> Node:
    """The node's row as a model instance (see node_row)."""
    return Node(**node_row(snapshot, pods, pools, pool_ids, seen_at))


def _adapter(field: models.Field[Any, Any], tz: tzinfo | None) -> Callable[[Any], Any] | None:
    """How a value of `field` becomes a parameter; None: as it is. On SQLite (`tz`: the
    connection's zone) the backend's adapters are written out: a sync adapts hundreds of
    thousands of values, and they cost more than the rest of building a row. Elsewhere, the
    field's own preparation."""
    if isinstance(field, models.JSONField):
        if tz is not None and field.encoder is None:
            return json_text
        return lambda value: field.get_db_prep_save(value, connection)
    if isinstance(field, models.DateTimeField):
        return sqlite_datetime(tz) if tz is not None else connection.ops.adapt_datetimefield_value
    return None


@cache
def _upsert_statement(
    model: type[models.Model],
    unique: tuple[str, ...],
    keep: tuple[str, ...],
    keep_unless_empty: tuple[str, ...],
    vendor: str,
    tz: tzinfo | None,
) -> tuple[
    str, Callable[[dict[str, Any]], tuple[Any, ...]], list[tuple[int, Callable[[Any], Any]]]
]:
    """The upsert of `model` keyed on the fields `unique` (a unique constraint's), updating
    every field but `keep` on conflict (and `keep_unless_empty` when the new value is ''); a
    getter of a row's values in column
    order, and the adapter of each column that needs one."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = [quote(f.column) for f in fields]

    def update(column: str, name: str) -> str:
        if name in keep_unless_empty:
            return f"{column} = COALESCE(NULLIF(EXCLUDED.{column}, ''), {table}.{column})"
        return f"{column} = EXCLUDED.{column}"

    updates = ", ".join(
        update(quote(f.column), f.name)
        for f in fields
        if f.name not in unique and f.name not in keep
    )
    # Identifiers from the model's own metadata, quoted; every value is a parameter.
    head = f"INSERT INTO {table} ({', '.join(columns)})"
    values = f"VALUES ({', '.join(['%s'] * len(columns))})"
    key = ", ".join(quote(model._meta.get_field(name).column) for name in unique)
    conflict = f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    sql = f"{head} {values} {conflict}"
    adapters = [(i, a) for i, f in enumerate(fields) if (a := _adapter(f, tz)) is not None]
    return sql, operator.itemgetter(*(f.attname for f in fields)), adapters


def _parameters(
    row: dict[str, Any],
    getter: Callable[[dict[str, Any]], tuple[Any, ...]],
    adapters: list[tuple[int, Callable[[Any], Any]]],
) -> list[Any]:
    values = list(getter(row))
    for index, adapt in adapters:
        if (value := values[index]) is not None:
            values[index] = adapt(value)
    return values


def executemany(sql: str, params: Sequence[Sequence[Any]]) -> None:
    """One prepared statement, many parameter sets, in one transaction. Outside one, each
    row would be its own: SQLite in autocommit mode commits after every row of an
    `executemany` (four times the cost of the rows themselves, at 100,000 pod rows)."""
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.executemany(sql, params)


def upsert(
    model: type[models.Model],
    rows: Iterable[dict[str, Any]],
    *,
    unique: tuple[str, ...],
    keep: tuple[str, ...] = (),
    keep_unless_empty: tuple[str, ...] = (),
) -> int:
    """Insert or update `rows` (attribute name -> value) in one statement."""
    tz = connection.timezone if connection.vendor == "sqlite" else None
    sql, getter, adapters = _upsert_statement(
        model, unique, keep, keep_unless_empty, connection.vendor, tz
    )
    params = [_parameters(row, getter, adapters) for row in rows]
    if params:
        executemany(sql, params)
    return len(params)


def node_values(node: Node) -> dict[str, Any]:
    return {f.attname: getattr(node, f.attname) for f in Node._meta.concrete_fields}


def nodes_upsert(rows: list[Node]) -> None:
    if upsert(Node, (node_values(n) for n in rows), unique=NODE_KEY, keep=NODE_KEPT):
        inventory_version_bump()
        stays_follow([n.name for n in rows], rows[0].last_seen)


def node_rows_upsert(rows: list[dict[str, Any]]) -> None:
    """Write node rows made by node_row (one statement)."""
    if upsert(Node, rows, unique=NODE_KEY, keep=NODE_KEPT):
        inventory_version_bump()
        stays_follow([r["name"] for r in rows], rows[0]["last_seen"])


def nodes_mark_gone(nodes: QuerySet[Node], at: datetime) -> int:
    """Mark the present nodes of `nodes` gone (one statement); how many were."""
    going = list(nodes.filter(gone_at__isnull=True).values_list("name", flat=True))
    gone = nodes.filter(gone_at__isnull=True).update(gone_at=at)
    if gone:
        inventory_version_bump()
        stays_follow(going, at)
    return gone


def nodes_pods_update(pods_by_node: dict[str, Iterable[PodSummary]], seen_at: datetime) -> int:
    """Write only the columns made of each node's pods, and when the node was seen (one
    statement): a pod that came, went or changed phase leaves the node's labels, taints and
    drift as they were."""
    if not pods_by_node:
        return 0
    quote = connection.ops.quote_name
    fields = [Node._meta.get_field(name) for name in (*POD_COLUMNS, "last_seen")]
    tz = connection.timezone if connection.vendor == "sqlite" else None
    # Each column as its field's own preparation makes it (the JSON ones as JSON).
    adapters = [_adapter(Node._meta.get_field(c), tz) or (lambda value: value) for c in POD_COLUMNS]
    seen = connection.ops.adapt_datetimefield_value(seen_at)
    # Identifiers from the model's own metadata, quoted; every value is a parameter.
    sql = (
        f"UPDATE {quote(Node._meta.db_table)} "  # noqa: S608
        f"SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
        "WHERE cluster = %s AND name = %s"
    )
    cluster = current_cluster()
    params = []
    for name, pods in pods_by_node.items():
        columns = node_pod_columns(pods)
        params.append(
            [
                *(adapt(columns[c]) for c, adapt in zip(POD_COLUMNS, adapters, strict=True)),
                seen,
                cluster,
                name,
            ]
        )
    executemany(sql, params)
    inventory_version_bump()
    return len(params)


def gpu_pods_upsert(rows: list[dict[str, Any]], now: datetime | None = None) -> datetime:
    """Write GPU pod rows; pool_label is kept on conflict: where the pod was bound. Returns
    the rows' updated_at."""
    stamp = now or timezone.now()
    cluster = current_cluster()
    upsert(
        GpuPod,
        ({**row, "cluster": cluster, "updated_at": stamp} for row in rows),
        unique=("uid",),
        keep=KEPT,
        keep_unless_empty=KEPT_UNLESS_EMPTY,
    )
    return stamp


def gpu_pod_sqlite_row() -> SqliteRow | None:
    """On SQLite, the GPU pod upsert's columns, for a page reader to build each row's
    parameters (gpu_pods_write); None elsewhere, where the driver adapts the values."""
    if connection.vendor != "sqlite":
        return None
    fields = [f for f in GpuPod._meta.concrete_fields if not f.primary_key]
    return SqliteRow(
        tuple(f.attname for f in fields),
        frozenset(
            f.attname for f in fields if isinstance(f, models.JSONField) and f.encoder is None
        ),
        frozenset(f.attname for f in fields if isinstance(f, models.DateTimeField)),
        connection.timezone,
    )


def gpu_pods_write(params: list[tuple[Any, ...]]) -> int:
    """Write GPU pod rows given as the upsert's parameters (gpu_pod_sqlite_row): the same
    statement as gpu_pods_upsert."""
    sql, _, _ = _upsert_statement(
        GpuPod, ("uid",), KEPT, KEPT_UNLESS_EMPTY, connection.vendor, connection.timezone
    )
    if params:
        executemany(sql, params)
    return len(params)


def nodes_present() -> list[str]:
    """The names of the node rows not marked gone."""
    return list(Node.objects.filter(gone_at__isnull=True).values_list("name", flat=True))


def nodes_seen(at: datetime) -> int:
    """A full listing saw every present node at `at`: one statement, whatever the number of
    nodes, moves their last_seen on. A listing writes the rows of changed nodes only, so
    without this an unchanged node's last_seen would stay at its last change and read as
    not seen (the readiness check, the node page, the CSV). Call it once the nodes the
    listing did not show are marked gone. Returns how many rows moved on."""
    seen = Node.objects.filter(gone_at__isnull=True, last_seen__lt=at).update(last_seen=at)
    if seen:
        inventory_version_bump()
    return seen


def nodes_gone(names: Iterable[str], at: datetime) -> int:
    """Mark the rows of these nodes gone (one statement, however many)."""
    table = connection.ops.quote_name(Node._meta.db_table)
    # The table's name from the model's metadata, quoted; every value a parameter.
    sql = f"UPDATE {table} SET gone_at = %s WHERE name = %s AND gone_at IS NULL"  # noqa: S608
    stamp = connection.ops.adapt_datetimefield_value(at)
    going = sorted(names)
    params = [(stamp, name) for name in going]
    if params:
        executemany(sql, params)
        inventory_version_bump()
        stays_follow(going, at)
    return len(params)


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


@dataclass
class PodRowsListed:
    """A full listing of pods against the rows already kept: which pods to write (new ones,
    and those whose resourceVersion changed: an unchanged object makes an unchanged row),
    then which rows name a pod the listing did not show (deleted meanwhile)."""

    known: dict[str, str]  # uid -> resourceVersion of every row not marked deleted
    seen: set[str] = field(default_factory=set)

    @classmethod
    def read(cls) -> PodRowsListed:
        live = GpuPod.objects.filter(deleted_at__isnull=True)
        return cls(dict(live.values_list("uid", "resource_version")))

    def changed_pod(self, uid: str, version: str) -> bool:
        """Whether the pod's row must be written; the pod is seen."""
        self.seen.add(uid)
        return not version or self.known.get(uid) != version

    def unseen_deleted(self, at: datetime) -> int:
        """Mark the rows of pods the listing did not show deleted (one statement)."""
        gone = [uid for uid in self.known if uid not in self.seen]
        if gone:
            table = connection.ops.quote_name(GpuPod._meta.db_table)
            # The table's name from the model's metadata, quoted; every value a parameter.
            sql = f"UPDATE {table} SET deleted_at = %s WHERE uid = %s AND deleted_at IS NULL"  # noqa: S608
            stamp = connection.ops.adapt_datetimefield_value(at)
            executemany(sql, [(stamp, uid) for uid in gone])
        return len(gone)


def gpu_pods_purge(now: datetime) -> int:
    """Forget pods deleted more than POD_HISTORY_DAYS ago."""
    cutoff = now - timedelta(days=settings.POD_HISTORY_DAYS)
    deleted, _ = GpuPod.objects.filter(Q(deleted_at__lt=cutoff)).delete()
    return deleted
