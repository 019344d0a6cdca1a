"""Reads for pages and the API: a constant number of SQL and PromQL queries per page."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Prefetch, Q, QuerySet

from pools.core import charts, figures
from pools.core.desired import PoolSpec, Taint, drift, managed_label_keys, managed_taint_keys
from pools.core.figures import GpuRow, NodeMetrics, NodeRow, PoolFigures
from pools.metrics import dcgm
from pools.metrics.node_figures import latest_node_metrics, reads_recorded
from pools.metrics.results import RangeResult
from pools.models import AuditEvent, MoveItem, MoveRequest, Node, NodeQuerySet, Pool
from pools.workflow.rules import OPEN_LOAN_STATES, Action, allowed_actions

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
)


def node_rows(nodes: Iterable[Any], metrics: Mapping[str, NodeMetrics]) -> list[NodeRow]:
    return [
        NodeRow(name, pool, model, gpus, allocated, ready, cordoned, drifted, metrics.get(name))
        for name, pool, model, gpus, allocated, ready, cordoned, drifted in nodes
    ]


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


def overview() -> Overview:
    pools = list(Pool.objects.active())
    result, metrics = latest_node_metrics()
    rows = node_rows(Node.objects.present().values_list(*_ROW_FIELDS), metrics)
    groups = figures.group_by_pool(rows)
    available = result.available
    # One pass over the rows: each group's figures, and the cluster's merged from them.
    by_group = {
        name: figures.pool_figures(members, metrics_available=available)
        for name, members in groups.items()
    }
    empty = figures.pool_figures([], metrics_available=available)
    cards = [PoolCard(pool, by_group.get(pool.name, empty)) for pool in pools]
    cards.append(PoolCard(None, by_group.get(None, empty)))
    cluster = figures.merge_figures(by_group.values(), metrics_available=available)
    return Overview(cluster, cards, result.error)


# --- the pool page ---

SORTS = {
    "name": lambda r: r.name,
    "model": lambda r: (r.gpu_model, r.name),
    "gpus": lambda r: (r.gpus, r.name),
    "allocated": lambda r: (r.allocated, r.name),
    "unallocated": lambda r: (r.unallocated, r.name),
    "util": lambda r: (
        r.metrics.util if r.metrics and r.metrics.util is not None else -1.0,
        r.name,
    ),
    "temp": lambda r: (
        r.metrics.temp_max if r.metrics and r.metrics.temp_max is not None else -1.0,
        r.name,
    ),
    "xid": lambda r: (r.metrics.xid_gpus if r.metrics else -1, r.name),
}


@dataclass(frozen=True)
class TableRow:
    row: NodeRow
    pods: int
    fb_percent: float | None


@dataclass(frozen=True)
class PoolPage:
    pool: Pool | None
    figures: PoolFigures
    rows: list[TableRow]
    total_rows: int
    models: tuple[str, ...]
    metrics_error: str | None


def pool_nodes(pool: Pool | None) -> NodeQuerySet:
    """The pool's present nodes (None: the unassigned ones)."""
    qs = Node.objects.present()
    return qs.filter(pool=pool) if pool is not None else qs.filter(pool__isnull=True)


def _table_row(row: NodeRow, pods: int) -> TableRow:
    m = row.metrics
    fb = 100 * m.fb_used / m.fb_total if m and m.fb_used is not None and m.fb_total else None
    return TableRow(row, pods, fb)


def pool_page(pool: Pool | None, *, shown: QuerySet[Node], sort: str = "name") -> PoolPage:
    """The pool's figures over all its nodes, and the table of the nodes in `shown` (the
    pool's nodes with the page's filters applied), sorted by `sort` ("-" first: descending)."""
    result, metrics = latest_node_metrics()
    raw = list(pool_nodes(pool).values_list(*_ROW_FIELDS, "pods"))
    pod_counts = {r[0]: len(r[-1]) for r in raw}
    rows = node_rows((r[:-1] for r in raw), metrics)
    pool_figures = figures.pool_figures(rows, metrics_available=result.available)
    names = set(shown.values_list("name", flat=True))
    key = sort.lstrip("-")
    kept = sorted(
        (r for r in rows if r.name in names),
        key=SORTS.get(key, SORTS["name"]),
        reverse=sort.startswith("-"),
    )
    table = [_table_row(r, pod_counts[r.name]) for r in kept]
    return PoolPage(pool, pool_figures, table, len(rows), pool_figures.gpu_models, result.error)


def pool_history(pool: Pool | None, span: str) -> RangeResult:
    """The pool's utilisation over the named range (charts.TIME_RANGES; UnknownRange else)."""
    length, step = charts.time_range(span)
    names = list(pool_nodes(pool).values_list("name", flat=True))
    # Read after the page's node figures, which found out whether the rules are loaded.
    recorded = reads_recorded("gpus_reporting") and reads_recorded("util")
    return dcgm.utilisation_history(names, span=length, step=step, recorded=recorded)


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


def _active_specs() -> list[PoolSpec]:
    return [p.spec() for p in Pool.objects.active()]


def node_detail(node: Node) -> NodeDetail:
    gpus, error = dcgm.node_gpus(node.name)
    specs = _active_specs()
    label_keys = managed_label_keys(specs, settings.POOL_LABEL_KEY)
    taint_keys = managed_taint_keys(specs)
    return NodeDetail(
        node=node,
        gpus=gpus,
        labels=[LabelRow(k, v, k in label_keys) for k, v in sorted(node.labels.items())],
        taints=[(t, t.key in taint_keys) for t in node.taint_objects()],
        metrics_error=error,
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
    key = settings.POOL_LABEL_KEY
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


def _loans() -> QuerySet[MoveRequest]:
    """Loans with what the loans page shows: each node and the pool it came from, the
    destination, and the return moves that point back to them."""
    return (
        MoveRequest.objects.filter(loan_until__isnull=False)
        .select_related("destination", "requested_by")
        .prefetch_related(
            Prefetch(
                "items",
                MoveItem.objects.select_related("node", "source_pool").order_by("node__name"),
            ),
            Prefetch(
                "children",
                MoveRequest.objects.filter(kind=MoveRequest.Kind.LOAN_RETURN).order_by("id"),
                to_attr="returns",
            ),
        )
        .annotate(nodes=Count("items"))
    )


def active_loans() -> list[MoveRequest]:
    """Open loans, the soonest to end first."""
    return list(
        _loans()
        .filter(loan_return_requested_at__isnull=True, state__in=OPEN_LOAN_STATES)
        .order_by("loan_until")
    )


def ended_loans(*, limit: int = 50) -> list[MoveRequest]:
    """Loans whose nodes went back (or that never lent anything), the latest first."""
    return list(
        _loans()
        .exclude(loan_return_requested_at__isnull=True, state__in=OPEN_LOAN_STATES)
        .order_by("-loan_until", "-id")[:limit]
    )


def moves_awaiting_decision_count(user: Any) -> int:
    """The pending requests `user` may approve, by the workflow's own rule (so never their
    own): the navigation's badge. One query."""
    pending = MoveRequest.objects.filter(state=MoveRequest.State.PENDING).only(
        "id", "state", "requested_by_id", "loan_until", "loan_return_requested_at"
    )
    return sum(Action.APPROVE in allowed_actions(user, move) for move in pending)


def moves_for_list() -> QuerySet[MoveRequest]:
    """Requests, newest first, with what the list shows: destination, requester, approvals
    and the number of nodes."""
    return (
        MoveRequest.objects.select_related("destination", "requested_by")
        .prefetch_related("approvals")
        .annotate(node_count=Count("items", distinct=True))
        .order_by("-created_at", "-id")
    )


def audit_event_types() -> list[str]:
    """The event types the log holds (move.approved, node.patched, …), for the audit filter."""
    return list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct())
