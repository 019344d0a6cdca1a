"""Each node's stays in its pools, kept in step with the inventory's rows, and read back
for a window.

Every writer of Node rows (the watcher, the full sync, the refresh after a move) calls
`stays_follow` with the nodes it wrote: a stay is opened or closed only where a node's pool
changed or the node came or went, so an unchanged fleet costs two reads a batch and no
write. Two writers may see the same change (a move's refresh and the watcher's event): the
open stay is closed only while still open, and at most one stay a node is open (a unique
constraint; a second opening is dropped)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import BooleanField, DateTimeField, Q, QuerySet, Value

from pools.common.cluster_access import current_cluster
from pools.core.membership import Membership, Stay
from pools.models import Node, PoolStay

# Names a query's IN list holds at most (SQLite's default limit is far above it).
_CHUNK = 2000


def _chunks(names: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(names), _CHUNK):
        yield names[start : start + _CHUNK]


def _by_node(
    rows: QuerySet[Any, tuple[Any, ...]], key: str, names: Collection[str] | None
) -> dict[str, tuple[Any, ...]]:
    """`rows` (tuples, the node's name first) by node, for `names` only (None: all)."""
    if names is None:
        return {row[0]: row[1:] for row in rows}
    found = {}
    for chunk in _chunks(sorted(names)):
        found.update({row[0]: row[1:] for row in rows.filter(**{f"{key}__in": chunk})})
    return found


def _rows(names: Collection[str] | None) -> dict[str, tuple[Any, ...]]:
    """Each node's (pool label, gone_at)."""
    return _by_node(Node.objects.values_list("name", "pool_label", "gone_at"), "name", names)


def _open_stays(names: Collection[str] | None) -> dict[str, tuple[Any, ...]]:
    """Each node's open stay: (pk, pool label)."""
    stays = PoolStay.objects.filter(until__isnull=True)
    return _by_node(stays.values_list("node_name", "pk", "pool_label"), "node_name", names)


def _known(names: Sequence[str]) -> set[str]:
    """Those of `names` that have a stay already (closed ones: a node that comes back)."""
    known: set[str] = set()
    for chunk in _chunks(names):
        known.update(
            PoolStay.objects.filter(node_name__in=chunk).values_list("node_name", flat=True)
        )
    return known


def stays_follow(names: Collection[str] | None, at: datetime) -> int:
    """Bring the open stays of the nodes `names` (None: every node) in line with their
    rows: a node in another pool than its open stay says gets a new stay from `at`, a node
    gone has its stay closed when it went. Returns how many stays were opened or closed."""
    rows = _rows(names)
    current = _open_stays(names)
    closing: dict[datetime, list[int]] = defaultdict(list)
    opening: list[tuple[str, str]] = []
    for name, (label, gone_at) in rows.items():
        stay = current.get(name)
        if gone_at is not None:
            if stay is not None:
                closing[gone_at].append(stay[0])
            continue
        if stay is not None and stay[1] == label:
            continue
        if stay is not None:
            closing[at].append(stay[0])
        opening.append((name, label))
    closed = 0
    for until, pks in closing.items():
        closed += PoolStay.objects.filter(pk__in=pks, until__isnull=True).update(until=until)
    known = _known([name for name, _ in opening])
    _stays_open([(name, label, name not in known) for name, label in opening], at)
    return closed + len(opening)


def _stays_open(opening: list[tuple[str, str, bool]], at: datetime) -> None:
    """Insert an open stay for each (node, pool label, earliest); one already open is kept
    (another writer opened it first: the unique constraint on open stays). One statement,
    its parameters built here: an initial sync opens a stay for every node, and Django's
    bulk_create spent more building 65,000 objects than the database writing them."""
    if not opening:
        return
    quote = connection.ops.quote_name
    table = quote(PoolStay._meta.db_table)
    names = ("cluster", "node_name", "pool_label", "since", "until", "earliest", "source")
    columns = ", ".join(quote(PoolStay._meta.get_field(n).column) for n in names)
    # Identifiers from the model's own metadata, quoted; every value a parameter.
    sql = (
        f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(names))}) "  # noqa: S608
        "ON CONFLICT DO NOTHING"
    )
    cluster, since = current_cluster(), connection.ops.adapt_datetimefield_value(at)
    observed = PoolStay.Source.OBSERVED.value
    params = [
        (cluster, name, label, since, None, earliest, observed) for name, label, earliest in opening
    ]
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _epoch(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


def membership(start: datetime, end: datetime, *, pool: str | None = None) -> Membership:
    """Every stay that touches [start, end) (one query): a first stay reaches back before
    its start, so every node's first stay is read when it ends after `start`. A node no
    stay records (a row written by hand) is taken to be in its row's pool all along.
    `pool`: that pool's stays only (by its label), enough for Membership.members(pool)."""
    recorded = (
        PoolStay.objects.filter(
            Q(until__isnull=True) | Q(until__gt=start), Q(since__lt=end) | Q(earliest=True)
        )
        .order_by()
        .values_list("node_name", "pool_label", "since", "until", "earliest")
    )
    if pool is not None:
        recorded = recorded.filter(pool_label=pool)
    unrecorded = (
        Node.objects.filter(Q(gone_at__isnull=True) | Q(gone_at__gt=start))
        .exclude(name__in=PoolStay.objects.values("node_name"))
        .annotate(
            no_start=Value(None, output_field=DateTimeField()),
            first=Value(True, output_field=BooleanField()),
        )
        .order_by()
        .values_list("name", "pool_label", "no_start", "gone_at", "first")
    )
    if pool is not None:
        unrecorded = unrecorded.filter(pool_label=pool)
    return Membership(
        Stay(node, pool, _epoch(since) or float("-inf"), _epoch(until), earliest)
        for node, pool, since, until, earliest in recorded.union(unrecorded, all=True)
    )


def membership_at_epoch(start: float, end: float) -> Membership:
    """`membership` over a window given in epoch seconds."""
    return membership(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
