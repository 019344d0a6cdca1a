"""Reads of pools and nodes for pages and the API: a constant number of SQL and PromQL
queries per page."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count, F, Q, QuerySet
from django.db.models.functions import Greatest

from pools.common.cluster_access import current_cluster, pool_label_key
from pools.core import charts, figures
from pools.core.desired import drift
from pools.core.devices import WHOLE, NodeDevices, devices_from_record
from pools.core.figures import GpuRow, NodeMetrics, NodeRow, PoolFigures
from pools.core.gc_pause import collector_paused
from pools.core.membership import all_along
from pools.core.owned_keys import ownership_problems
from pools.core.pool_sums import RecordedSums, figures_with_sums, membership_digest
from pools.core.snippets import CLAIM, GPU_RESOURCE
from pools.core.taints import Taint
from pools.fleet.targets import pool_target
from pools.inventory.version import inventory_version
from pools.membership.stays import membership
from pools.metrics import dcgm, source
from pools.metrics.node_figures import derived_figures, reads_recorded
from pools.metrics.pool_sums import recorded_pool_sums
from pools.metrics.results import InstantResult, RangeResult
from pools.models import Node, NodeQuerySet, Pool

UNASSIGNED = "unassigned"
HISTORY_SPANS = tuple(charts.TIME_RANGES)


_ROW_FIELDS = (
    "name",
    "pool__name",
    "gpu_model",
    "gpu_allocatable",
    "gpu_allocated",
    "ready",
    "cordoned",
    "drifted",
    "gpu_count",
    "devices",
    "resources_requested",
    "dra_units",
)


def node_rows(nodes: Iterable[Any], metrics: Mapping[str, NodeMetrics]) -> list[NodeRow]:
    """NodeRows from _ROW_FIELDS rows, as the ORM or the driver returns them (JSON parsed or
    as text): a node of whole GPUs only keeps an empty device record, read for nothing."""
    rows = []
    for row in nodes:
        name, pool, model, gpus, allocated, ready, cordoned, drifted, count = row[:9]
        record, asked, dra = row[9:]
        if (not record or record == "{}") and (not dra or dra == "[]"):
            rows.append(
                NodeRow(
                    name,
                    pool,
                    model,
                    gpus,
                    allocated,
                    ready,
                    cordoned,
                    drifted,
                    metrics.get(name),
                    count,
                )
            )
            continue
        devices = devices_from_record(
            json.loads(record) if isinstance(record, str) else record,
            gpu_model=model,
            gpu_count=count,
            gpu_memory_mib=0,
            gpu_allocatable=gpus,
            gpu_allocated=allocated,
            requested=json.loads(asked) if isinstance(asked, str) else asked,
            dra=json.loads(dra) if isinstance(dra, str) else dra,
        )
        units = tuple(
            (u.kind.label, u.allocatable, u.allocated)
            for u in devices.units
            if u.kind.kind != WHOLE
        )
        rows.append(
            NodeRow(
                name,
                pool,
                model,
                devices.whole_gpus,
                devices.whole_allocated,
                ready,
                cordoned,
                drifted,
                metrics.get(name),
                devices.gpus,
                units,
            )
        )
    return rows


def pools_node_rows(pool_names: Iterable[str], *, names: Iterable[str] = ()) -> list[NodeRow]:
    """The present nodes of these pools, and those named, as NodeRows without metrics (one
    query)."""
    wanted = Q(pool__name__in=list(pool_names)) | Q(name__in=list(names))
    return node_rows(Node.objects.present().filter(wanted).values_list(*_ROW_FIELDS), {})


@dataclass(frozen=True)
class PoolCard:
    pool: Pool | None  # None: the unassigned GPU nodes
    figures: PoolFigures

    @property
    def slug(self) -> str:
        return self.pool.name if self.pool else UNASSIGNED


@dataclass(frozen=True)
class Overview:
    cluster: PoolFigures
    cards: list[PoolCard]
    metrics_error: str | None


@dataclass(frozen=True)
class PoolFigureSet:
    by_pool: dict[str | None, PoolFigures]  # by pool name; None: the unassigned nodes
    cluster: PoolFigures
    empty: PoolFigures  # a pool without present nodes

    def of(self, pool: str | None) -> PoolFigures:
        return self.by_pool.get(pool, self.empty)


def _figure_rows() -> list[tuple[Any, ...]]:
    """Every present node's _ROW_FIELDS as the database driver returns them: the figures
    count SQLite's 0 and 1 as they count False and True, and the ORM's converters for the
    three flags cost half of reading 5,000 rows."""
    sql, params = Node.objects.present().values_list(*_ROW_FIELDS).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _pool_figure_set(result: InstantResult, metrics: Mapping[str, NodeMetrics]) -> PoolFigureSet:
    with collector_paused():  # a row and its figures a node, and no cycle among them
        rows = node_rows(_figure_rows(), metrics)
        return _figures_of(rows, available=result.available)


def _figures_of(
    rows: list[NodeRow], *, available: bool, sums: RecordedSums | None = None
) -> PoolFigureSet:
    """Each group's figures, from its rows' metrics or from `sums` (Prometheus' per-pool
    sums, the rows then without metrics), and the cluster's merged from them."""
    by_pool = {
        name: figures.pool_figures(members, metrics_available=available)
        if sums is None
        else figures_with_sums(members, sums.by_pool.get(name), metrics_available=available)
        for name, members in figures.group_by_pool(rows).items()
    }
    return PoolFigureSet(
        by_pool,
        figures.merge_figures(by_pool.values(), metrics_available=available),
        figures.pool_figures([], metrics_available=available),
    )


def pool_figure_set() -> tuple[InstantResult, Mapping[str, NodeMetrics], PoolFigureSet]:
    """Every node's DCGM figures, and every pool's figures and the cluster's over all
    present nodes. The pool figures are cached with the node figures under the inventory
    version: while neither changes, no node row is read."""
    # The version before the rows: figures stored under it are at least as new as it.
    version = inventory_version()
    return derived_figures("pool-figures", version, _pool_figure_set)


def _figures_over_sums(sums: RecordedSums) -> PoolFigureSet | None:
    """Every pool's figures from the node rows (without metrics) and the recorded per-pool
    sums; None when the sums were made over another membership than the rows'."""
    with collector_paused():
        rows = node_rows(_figure_rows(), {})
        if membership_digest((row.name, row.pool) for row in rows) != sums.digest:
            return None  # a node moved, came or went since Prometheus last scraped
        return _figures_of(rows, available=True, sums=sums)


def recorded_pool_figure_set() -> PoolFigureSet | None:
    """Every pool's figures over the sums Prometheus recorded per pool, when it has them for
    the current membership: no node's figures are asked. Kept under the sums and the
    inventory version, so a warm overview reads no node row."""
    sums = recorded_pool_sums()
    if sums is None:
        return None
    # The version before the rows: figures stored under it are at least as new as it.
    # The cluster too: two clusters' portals may read one Prometheus (their rows differ).
    version = inventory_version()
    key = source.cache_key("pool-figures-recorded", current_cluster(), version, repr(sums))
    kept = cache.get(key)
    if kept is not None:
        return kept or None  # False: the rows did not match these sums
    figure_set = _figures_over_sums(sums)
    cache.set(key, figure_set or False, settings.METRICS_CACHE_SECONDS)
    return figure_set


def overview() -> Overview:
    pools = list(Pool.objects.active())
    figure_set = recorded_pool_figure_set()
    error = None
    if figure_set is None:
        result, _, figure_set = pool_figure_set()
        error = result.error
    cards = [PoolCard(pool, figure_set.of(pool.name)) for pool in pools]
    cards.append(PoolCard(None, figure_set.of(None)))
    return Overview(figure_set.cluster, cards, error)


# --- the pool page ---

TABLE_PAGE_ROWS = 100  # as the API's pages
# Sorts the database does (then by name), and sorts by a DCGM figure from the node figures
# (then by name; a node without the figure first, ascending).
SQL_SORTS = {
    "name": ("name",),
    "model": ("gpu_model", "name"),
    "gpus": ("gpu_allocatable", "name"),
    "allocated": ("gpu_allocated", "name"),
    "unallocated": ("unallocated", "name"),
}
METRIC_SORTS: dict[str, Callable[[NodeMetrics | None], float]] = {
    "util": lambda m: m.util if m and m.util is not None else -1.0,
    "temp": lambda m: m.temp_max if m and m.temp_max is not None else -1.0,
    "xid": lambda m: m.xid_gpus if m else -1,
}


@dataclass(frozen=True)
class TableRow:
    row: NodeRow
    pods: int
    fb_percent: float | None


@dataclass(frozen=True)
class PoolPage:
    pool: Pool | None
    figures: PoolFigures  # over the whole pool, whatever the filter and the page
    rows: list[TableRow]  # the table's page
    matching: int  # nodes the filter lets through, on every page
    total_rows: int  # the pool's present nodes
    models: tuple[str, ...]
    metrics_error: str | None
    number: int  # this page's number, from 1
    pages: int
    first: int  # the positions of the page's first and last rows among the matching ones
    last: int


def pool_nodes(pool: Pool | None) -> NodeQuerySet:
    """The pool's present nodes (None: the unassigned ones)."""
    qs = Node.objects.present()
    return qs.filter(pool=pool) if pool is not None else qs.filter(pool__isnull=True)


def _table_row(row: NodeRow, pods: int) -> TableRow:
    m = row.metrics
    fb = 100 * m.fb_used / m.fb_total if m and m.fb_used is not None and m.fb_total else None
    return TableRow(row, pods, fb)


def _metric_sorted_page(
    shown: QuerySet[Node], metrics: Mapping[str, NodeMetrics], key: str, descending: bool
) -> tuple[Paginator[str], Callable[[Page[str]], list[tuple[Any, ...]]]]:
    figure = METRIC_SORTS[key]
    names = sorted(
        shown.values_list("name", flat=True),
        key=lambda name: (figure(metrics.get(name)), name),
        reverse=descending,
    )

    def rows_of(page: Page[str]) -> list[tuple[Any, ...]]:
        wanted = list(page.object_list)
        found = Node.objects.filter(name__in=wanted).values_list(*_ROW_FIELDS, "pods")
        by_name = {row[0]: row for row in found}
        return [by_name[name] for name in wanted if name in by_name]

    return Paginator(names, TABLE_PAGE_ROWS), rows_of


def _table_page(
    shown: QuerySet[Node], metrics: Mapping[str, NodeMetrics], sort: str, number: object
) -> tuple[Page[Any], list[tuple[Any, ...]]]:
    """One page of `shown` sorted by `sort`, and its rows (_ROW_FIELDS and pods): reading
    the page's rows only, or, for a sort by a DCGM figure, every matching node's name."""
    key, descending = sort.lstrip("-"), sort.startswith("-")
    if key in METRIC_SORTS:
        names, rows_of = _metric_sorted_page(shown, metrics, key, descending)
        page = names.get_page(number)
        return page, rows_of(page)
    order = [f"-{f}" if descending else f for f in SQL_SORTS.get(key, SQL_SORTS["name"])]
    ordered = (
        shown.annotate(unallocated=Greatest(F("gpu_allocatable") - F("gpu_allocated"), 0))
        .order_by(*order)
        .values_list(*_ROW_FIELDS, "pods")
    )
    page = Paginator(ordered, TABLE_PAGE_ROWS).get_page(number)
    return page, list(page.object_list)


def pool_page(
    pool: Pool | None, *, shown: QuerySet[Node], sort: str = "name", number: object = 1
) -> PoolPage:
    """The pool's figures over all its nodes, and page `number` (from 1; Django's
    Paginator.get_page reads it) of the table of the nodes in `shown` (the pool's nodes with
    the page's filters applied), sorted by `sort` ("-" first: descending)."""
    result, metrics, figure_set = pool_figure_set()
    pool_figures = figure_set.of(pool.name if pool else None)
    page, raw = _table_page(shown, metrics, sort, number)
    rows = node_rows((r[:-1] for r in raw), metrics)
    return PoolPage(
        pool,
        pool_figures,
        [_table_row(row, len(r[-1])) for row, r in zip(rows, raw, strict=True)],
        page.paginator.count,
        pool_figures.nodes,
        pool_figures.gpu_models,
        result.error,
        page.number,
        page.paginator.num_pages,
        page.start_index(),
        page.end_index(),
    )


def pool_history(pool: Pool | None, span: str) -> RangeResult:
    """The pool's utilisation over the named range (charts.TIME_RANGES; UnknownRange else)."""
    length, step = charts.time_range(span)
    # The end on a step's boundary: the same answer, kept in the metrics cache, for every
    # request within the step (a range ending at a moment is cached under that moment).
    seconds = step.total_seconds()
    end = datetime.fromtimestamp(datetime.now(UTC).timestamp() // seconds * seconds, UTC)
    start = end - length
    if pool is None:  # nodes with no pool, or a label no pool declares: today's
        members = all_along(pool_nodes(None).values_list("name", flat=True))
    else:
        stays = membership(start, end, pool=pool.name)
        members = stays.members(pool.name, start.timestamp(), end.timestamp())
    # Read after the page's node figures, which found out whether the rules are loaded.
    recorded = reads_recorded("gpus_reporting") and reads_recorded("util")
    return dcgm.utilisation_history(members, span=length, step=step, recorded=recorded, now=end)


# --- the node page ---


@dataclass(frozen=True)
class LabelRow:
    key: str
    value: str
    managed: bool


@dataclass(frozen=True)
class NodeDetail:
    node: Node
    gpus: list[GpuRow]
    labels: list[LabelRow]
    taints: list[tuple[Taint, bool]]
    metrics_error: str | None
    devices: NodeDevices | None = None


def node_detail(node: Node) -> NodeDetail:
    gpus, error = dcgm.node_gpus(node.name)
    managed = pool_target(None)
    label_keys, taint_keys = managed.label_keys, managed.taint_keys
    return NodeDetail(
        node=node,
        gpus=gpus,
        labels=[LabelRow(k, v, k in label_keys) for k, v in sorted(node.labels.items())],
        taints=[(t, t.key in taint_keys) for t in node.taint_objects()],
        metrics_error=error,
        devices=node.device_set(),
    )


def node_history(node: Node, span: str = charts.DEFAULT_RANGE) -> dict[str, RangeResult]:
    """The node's charts over the named range: asked only by the full node page, not by its
    live refresh or the API."""
    length, step = charts.time_range(span)
    return dcgm.node_history(node.name, span=length, step=step)


# --- pool definitions: what a change would mean for the cluster ---


@dataclass(frozen=True)
class PoolImpact:
    newly_drifted: list[tuple[str, str]]  # node, what it would need
    no_longer_drifted: list[str]
    nodes_in_pool: int


def pools_for_list(*, retired: bool) -> QuerySet[Pool]:
    """Active (or retired) pools with how many present nodes each holds: the pools page."""
    pools = Pool.objects.retired() if retired else Pool.objects.active()
    return pools.annotate(node_count=Count("nodes", filter=Q(nodes__gone_at__isnull=True)))


def pool_change_impact(candidate: Pool) -> PoolImpact:
    """Which nodes a pool definition (unsaved) would make drifted, and which it would fix.
    The definition replaces the saved one of the same pool, if any."""
    others = [p.spec() for p in Pool.objects.active().exclude(pk=candidate.pk)]
    specs_after = [*others, candidate.spec()]
    key = pool_label_key()
    newly, fixed = [], []
    in_pool = 0
    for name, labels, taints, was_drifted, pool_label in Node.objects.present().values_list(
        "name", "labels", "taints", "drifted", "pool_label"
    ):
        in_pool += pool_label == candidate.name
        change = drift(labels, [Taint.from_api(t) for t in taints], specs_after, pool_key=key)
        if change is not None and not was_drifted:
            newly.append((name, change.summary()))
        elif change is None and was_drifted:
            fixed.append(name)
    return PoolImpact(newly, fixed, in_pool)


# --- moves and loans ---


def single_source_pool(node_names: list[str]) -> str | None:
    """The pool all these nodes are in, when it is one pool (the move form leaves it out of
    the destinations); None for none, several, or unassigned nodes."""
    pools = set(Node.objects.filter(name__in=node_names).values_list("pool__name", flat=True))
    return next(iter(pools)) if len(pools) == 1 else None


def drifted_node_names(pool: Pool) -> list[str]:
    """The pool's drifted nodes that no active move holds: what a reconcile can take."""
    return list(
        Node.objects.present()
        .filter(pool=pool, drifted=True)
        .exclude(move_items__active=True)
        .values_list("name", flat=True)
    )


def pools_claiming_owned_keys() -> dict[str, list[str]]:
    """Active pools whose labels or taint claim what another component owns, each with why:
    pools stored before the definition check refused them (readiness and check --deploy)."""
    found: dict[str, list[str]] = {}
    for pool in Pool.objects.active().only("name", "labels", "taint_key").order_by("name"):
        labels = pool.labels if isinstance(pool.labels, Mapping) else {}
        problems = ownership_problems(labels, pool.taint_key)
        if problems:
            found[pool.name] = [message for messages in problems.values() for message in messages]
    return found


def pool_gpu_resource(pool: Pool) -> str:
    """What a pod asks for to get one of the pool's GPU units: the resource its nodes offer
    most of (nvidia.com/gpu, a MIG profile's, the shared one's), or CLAIM when most are DRA
    devices. One query over the pool's present nodes."""
    totals: dict[str, int] = {}
    rows = Node.objects.present().filter(pool=pool)
    for allocatable, record, dra in rows.values_list("gpu_allocatable", "devices", "dra_units"):
        units = (record or {}).get("units") or []
        if not units and allocatable:
            totals[GPU_RESOURCE] = totals.get(GPU_RESOURCE, 0) + allocatable
        for _kind, resource, _profile, _sharing, _replicas, count in units:
            totals[resource] = totals.get(resource, 0) + count
        for _driver, _type, _profile, count, _held in dra or ():
            totals[CLAIM] = totals.get(CLAIM, 0) + count
    if not totals:
        return GPU_RESOURCE
    return max(sorted(totals), key=lambda name: totals[name])
