"""Reads for the pool insights, the workload profiles, the readiness checks and the advisor:
the pod history, the nodes and the DCGM figures gathered in a constant number of SQL and
PromQL queries, handed to the pure core (pools.core.insights) to compute."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, FloatField, Func, Q, QuerySet
from django.db.models.functions import Coalesce

from pools.common.cluster_access import current_cluster, pool_label_key, served_clusters
from pools.core import charts
from pools.core.cluster_scope import cluster_scope
from pools.core.desired import managed_label_keys, managed_taint_keys
from pools.core.devices import exporter_devices, record_units, units_held
from pools.core.insights import advisor, readiness
from pools.core.insights.elsewhere import IdlePool, idle_pools, send_elsewhere_advice
from pools.core.insights.failures import (
    EVICTION_REASONS,
    IMAGE_REASONS,
    TIMEOUT_REASONS,
    XidErrors,
    failure_report,
)
from pools.core.insights.indicators import InsightPool, PoolInsights, WindowMembers
from pools.core.insights.profiles import Profile, workload_profiles
from pools.core.insights.queueing import (
    GANG_OWNERS,
    QUEUED_AFTER_SECONDS,
    NodeMembership,
    queue_report,
)
from pools.core.insights.records import WINDOW_DAYS, HistoryPod, InsightNode, Window
from pools.core.insights.replacement import replacement_report
from pools.core.insights.scheduling import pod_scheduling, wanted_pool
from pools.core.insights.utilisation import idle_nodes_each_step, utilisation_report
from pools.core.membership import Membership, Span, all_along
from pools.insights.previews import previewed
from pools.membership.stays import membership, membership_at_epoch
from pools.metrics import insights as metrics
from pools.metrics.node_figures import latest_node_metrics
from pools.models import AdviceDismissal, GpuPod, MoveItem, MoveRequest, Node, Pool
from pools.moves.selectors import ACTIVE_LOAN

DEFAULT_DAYS = 30
T = TypeVar("T")


class Epoch(Func):
    """A datetime column as epoch seconds, computed by the database: 100,000 rows parsed
    into datetimes by Django's converters cost seconds, floats cost nothing."""

    output_field = FloatField()

    def as_sqlite(self, compiler, connection, **extra):  # type: ignore[no-untyped-def]
        # julianday() reads the stored text in C (to the millisecond, so round there);
        # 2440587.5 is the Unix epoch's day.
        return self.as_sql(
            compiler,
            connection,
            template="round((julianday(%(expressions)s) - 2440587.5) * 86400.0, 3)",
        )

    def as_postgresql(self, compiler, connection, **extra):  # type: ignore[no-untyped-def]
        # EXTRACT gives a numeric (a Decimal in Python): a float, as SQLite's.
        return self.as_sql(
            compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)::double precision"
        )


_POD_TIMES = {
    "created": Epoch("created_at"),
    "scheduled": Epoch("scheduled_at"),
    "started": Epoch("started_at"),
    "ended": Epoch(Coalesce("finished_at", "deleted_at")),
}
_POD_FIELDS = (
    "namespace",
    "name",
    "node_name",
    "pool_label",
    "phase",
    "units",  # every GPU unit it asks for: a MIG instance's pod is a GPU pod too
    "cpu_milli",
    "memory_bytes",
    "team",
    "workload_type",
    *_POD_TIMES,
    "termination_reason",
    "exit_code",
    "termination_message",
    "waiting_reason",
    "restarts",
)


def window_days(raw: object) -> int | None:
    """The window a page or the API asked for (None: not one of WINDOW_DAYS)."""
    try:
        days = int(str(raw)) if raw not in (None, "") else DEFAULT_DAYS
    except ValueError:
        return None
    return days if days in WINDOW_DAYS else None


def window_of(days: int, now: datetime) -> Window:
    end = now.timestamp()
    return Window(end - days * 86400.0, end)


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _alive_in(window: Window) -> Q:
    start = datetime.fromtimestamp(window.start, UTC)
    end = datetime.fromtimestamp(window.end, UTC)
    return Q(created_at__lt=end) & (
        Q(finished_at__gte=start)
        | Q(finished_at__isnull=True, deleted_at__isnull=True)
        | Q(finished_at__isnull=True, deleted_at__gte=start)
    )


def _wanted_pools(alive: QuerySet[GpuPod]) -> dict[int, str]:
    """The pool each unbound pod asks for, by pk."""
    key = pool_label_key()
    return {
        pk: wanted_pool(selector, affinity, key)
        for pk, selector, affinity in alive.filter(node_name="").values_list(
            "pk", "node_selector", "affinity"
        )
    }


def pod_records(window: Window) -> list[HistoryPod]:
    """Every GPU pod alive at some point of the window, every field (three queries: the
    pods, what the unbound ones ask for). A pending pod's pool is the one it asks for; a
    pod deleted before it finished ended when it was deleted."""
    alive = GpuPod.objects.filter(_alive_in(window))
    wanted = _wanted_pools(alive)
    rows = alive.annotate(**_POD_TIMES).order_by().values_list("pk", *_POD_FIELDS)
    return [
        HistoryPod(*row[1:])
        if row[4] or row[3]
        else HistoryPod(*row[1:4], wanted.get(row[0], ""), *row[5:])
        for row in rows
    ]


# What the indicators read of every pod (the queue, the gaps): few columns, since each
# column of 100,000 rows costs the database driver as much as the indicators' arithmetic.
_LEAN_FIELDS = ("pk", "node_name", "pool_label", "units", *_POD_TIMES)
# And of the pods that may have failed (a small share), what tells the cause apart.
_FAILURE_FIELDS = (
    "namespace",
    "name",
    "phase",
    "termination_reason",
    "exit_code",
    "termination_message",
    "waiting_reason",
)


def _may_have_failed() -> Q:
    return (
        Q(phase=GpuPod.Phase.FAILED)
        | (Q(exit_code__isnull=False) & ~Q(exit_code=0))
        | Q(termination_reason__in=EVICTION_REASONS | IMAGE_REASONS | TIMEOUT_REASONS)
        | Q(termination_reason__startswith="OutOf")
        | Q(waiting_reason__in=IMAGE_REASONS)
    )


def _cursor_rows(rows: QuerySet[GpuPod]) -> list[tuple]:  # type: ignore[type-arg]
    """A values_list's rows straight from the database cursor, without Django's converters
    (a call per value: 400,000 at 100,000 pods, a quarter of the read). Only for columns
    the driver already gives as their Python values: text, integers, Epoch floats."""
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _gangs(alive: QuerySet[GpuPod]) -> dict[int, str]:
    """The gang of each pod that may have queued (never bound, or bound more than a minute
    after it was made) and belongs to a Job-like owner, by pk: a small share."""
    queued = Q(scheduled_at__isnull=True) | Q(
        scheduled_at__gt=F("created_at") + timedelta(seconds=QUEUED_AFTER_SECONDS)
    )
    return {
        pk: f"{namespace}/{kind}/{owner}"
        for pk, namespace, kind, owner in alive.filter(
            queued, owner_kind__in=GANG_OWNERS
        ).values_list("pk", "namespace", "owner_kind", "owner_name")
    }


def indicator_records(window: Window) -> list[HistoryPod]:
    """Every GPU pod alive in the window with what the four indicators read: placement and
    times for all, failure details for those that may have failed, the gang of those that
    may have queued (four queries). Names and requests are left empty: the profiles read
    pod_records()."""
    alive = GpuPod.objects.filter(_alive_in(window))
    wanted = _wanted_pools(alive)
    failures = {
        row[0]: row[1:]
        for row in alive.filter(_may_have_failed()).values_list("pk", *_FAILURE_FIELDS)
    }
    gangs = _gangs(alive)
    records = []
    for pk, node, pool, gpus, created, scheduled, started, ended in _cursor_rows(
        alive.annotate(**_POD_TIMES).order_by().values_list(*_LEAN_FIELDS)
    ):
        pool = pool or ("" if node else wanted.get(pk, ""))
        ns, name, phase, reason, code, message, waiting = failures.get(pk, _NO_FAILURE)
        records.append(
            HistoryPod(
                ns, name, node, pool, phase, gpus, 0, 0, "", "",
                created, scheduled, started, ended, reason, code, message, waiting, 0,
                gangs.get(pk, ""),
            )
        )  # fmt: skip
    return records


_NO_FAILURE = ("", "", "", "", None, "", "")


_NODE_FIELDS = (
    "name",
    "pool__name",
    "gpu_allocatable",
    "gpu_model",
    "labels",
    "taints",
    "ready",
    "cordoned",
    "drifted",
    "gpu_allocated",
    "last_seen",
    "cpu_capacity_milli",
    "cpu_allocatable_milli",
    "memory_capacity_bytes",
    "memory_allocatable_bytes",
    "devices",
    "resources_requested",
)


@dataclass(frozen=True)
class NodesNow:
    facts: list[InsightNode]
    last_seen: dict[str, datetime]
    moving: set[str]  # nodes an active move holds
    metrics_error: str | None


def _taint(raw: dict[str, str]) -> tuple[str, str, str]:
    return raw.get("key", ""), raw.get("value", ""), raw.get("effect", "")


def nodes_now() -> NodesNow:
    """The present GPU nodes with their drivers and current DCGM coverage of every counter
    the pages draw (two SQL queries, the shared per-node figures and two PromQL queries)."""
    result, figures = latest_node_metrics()
    drivers, driver_error = metrics.node_drivers()
    coverage, coverage_error = metrics.counter_coverage()
    facts, seen = [], {}
    for (
        name,
        pool,
        gpus,
        model,
        labels,
        taints,
        ready,
        cordoned,
        drifted,
        allocated,
        last,
        cpu_capacity,
        cpu_allocatable,
        memory_capacity,
        memory_allocatable,
        devices,
        requested,
    ) in Node.objects.present().values_list(*_NODE_FIELDS):
        reporting = figures[name].gpus_reporting if name in figures else 0
        exporter = exporter_devices(devices) if devices else None
        facts.append(
            InsightNode(
                name=name,
                pool=pool,
                gpus=gpus,
                gpu_model=model,
                labels=labels,
                taints=tuple(_taint(t) for t in taints),
                driver=drivers.get(name, ""),
                ready=ready,
                cordoned=cordoned,
                drifted=drifted,
                allocated=units_held(allocated, requested),
                gpus_reporting=None if result.error else reporting,
                counters_reporting=None if coverage_error else coverage.get(name, {}),
                cpu_capacity=cpu_capacity,
                cpu_allocatable=cpu_allocatable,
                memory_capacity=memory_capacity,
                memory_allocatable=memory_allocatable,
                devices=exporter,
                units=record_units(devices, gpus) if devices else None,
                mig=bool(devices and devices.get("mig_gpus")),
            )
        )
        seen[name] = last
    moving = set(MoveItem.objects.filter(active=True).values_list("node__name", flat=True))
    return NodesNow(facts, seen, moving, result.error or driver_error or coverage_error)


def _pool_facts(pool: Pool, nodes: list[InsightNode], moving: set[str]) -> InsightPool:
    taint = pool.taint
    counts = Counter(n.gpus for n in nodes)
    return InsightPool(
        name=pool.name,
        dedicated=taint is not None and taint.effect in ("NoSchedule", "NoExecute"),
        nodes=len(nodes),
        gpus_per_node=counts.most_common(1)[0][0] if counts else 0,
        min_nodes=pool.min_nodes,
        accepted_models=tuple(pool.accepted_gpu_models or ()),
        lendable=tuple(
            (n.name, n.gpu_model)
            for n in nodes
            if n.ready and not n.cordoned and n.allocated == 0 and n.name not in moving
        ),
        candidates=tuple(
            (n.name, n.gpu_model, n.unit_count, n.allocated)
            for n in nodes
            if n.ready and not n.cordoned and n.name not in moving
        ),
    )


def node_memberships(
    window: Window, membership: Membership, gpus: Mapping[str, int]
) -> list[NodeMembership]:
    """Every GPU node of the window as it was, from its stays: the pool it was in at the
    window's start, each change of pool since and when it went."""
    histories = []
    for name in membership.by_node:
        if name not in gpus:
            continue
        pool, changes, gone_at = membership.timeline(name, window.start)
        histories.append(
            NodeMembership(
                name,
                gpus[name],
                pool or None,
                tuple((at, joined or None) for at, joined in changes),
                gone_at if gone_at is not None and gone_at < window.end else None,
            )
        )
    return histories


def window_nodes(window: Window, state: NodesNow) -> tuple[Membership, dict[str, int]]:
    """Who was in which pool over the window (two queries), and the allocatable GPU units
    of every node of it (whole GPUs, MIG instances, shares): today's and those gone since
    it began (one query)."""
    found = membership_at_epoch(window.start, window.end)
    gpus = {n.name: n.unit_count for n in state.facts}
    start = datetime.fromtimestamp(window.start, UTC)
    gone = Node.objects.filter(gone_at__gte=start)
    gpus.update(
        (name, record_units(record, allocatable))
        for name, allocatable, record in gone.values_list("name", "gpu_allocatable", "devices")
    )
    return found, gpus


@dataclass(frozen=True)
class Gathered:
    """Everything the indicators of every pool read, over one window."""

    window: Window
    days: int
    pools: list[Pool]
    state: NodesNow
    pods: list[HistoryPod]
    series: metrics.PoolSeries
    xid_times: Mapping[str, Sequence[float]]
    xid_error: str | None
    xid_step: float = 0.0  # a new XID error appeared at most this long before its time
    # Who was in which pool over the window, and every node's GPUs (None: today's nodes
    # stand for the whole window).
    membership: Membership | None = None
    node_gpus: Mapping[str, int] | None = None

    def members(self, pool: str) -> dict[str, tuple[Span, ...]]:
        """The pool's nodes over the window, each with its spans there."""
        if self.membership is None:
            return all_along(n.name for n in self.state.facts if n.pool == pool)
        return self.membership.members(pool, self.window.start, self.window.end)

    def nodes_then(self) -> list[NodeMembership]:
        if self.membership is None or self.node_gpus is None:
            return [NodeMembership(n.name, n.unit_count, n.pool) for n in self.state.facts]
        return node_memberships(self.window, self.membership, self.node_gpus)

    @property
    def xids(self) -> XidErrors:
        return XidErrors(self.xid_times, self.xid_step)


def xid_errors(days: int) -> tuple[XidErrors, str | None]:
    """The XID errors over the window (one PromQL query), as every failure count reads them."""
    times, error = metrics.xid_times(days=days)
    _, step = metrics.window_span(days)
    return XidErrors(times, step.total_seconds() + metrics.XID_SCRAPE_SLACK_SECONDS), error


def gather(*, days: int, now: datetime, pools: Iterable[Pool] | None = None) -> Gathered:
    """The pod history, the nodes and the DCGM series over the window, for `pools` (default:
    every active pool). A constant number of queries however many pools and nodes."""
    chosen = list(pools) if pools is not None else list(Pool.objects.active())
    window = window_of(days, now)
    state = nodes_now()
    membership, gpus = window_nodes(window, state)
    by_pool = {p.name: membership.members(p.name, window.start, window.end) for p in chosen}
    xids, xid_error = xid_errors(days)
    span, step = metrics.window_span(days)
    return Gathered(
        window=window,
        days=days,
        pools=chosen,
        state=state,
        pods=indicator_records(window),
        series=metrics.pool_series(
            by_pool,
            span=span,
            step=step,
            end=_at(window.end),
            never_idle={n.name for n in state.facts if not n.ready},
        ),
        xid_times=xids.times,
        xid_error=xid_error,
        xid_step=xids.step,
        membership=membership,
        node_gpus=gpus,
    )


def indicators(gathered: Gathered, pool: Pool) -> PoolInsights:
    """The four indicators of `pool` from what was gathered (no query)."""
    window, state = gathered.window, gathered.state
    nodes = [n for n in state.facts if n.pool == pool.name]
    mine = [p for p in gathered.pods if p.pool == pool.name]
    members = gathered.members(pool.name)
    every = gathered.node_gpus or {n.name: n.unit_count for n in state.facts}
    specs = [p.spec() for p in gathered.pools]
    return PoolInsights(
        pool=_pool_facts(pool, nodes, state.moving),
        window=window,
        utilisation=utilisation_report(
            target=float(pool.utilisation_target),
            average_points=gathered.series.average.get(pool.name, []),
            idle_node_points=gathered.series.idle_nodes.get(pool.name, []),
            pods=mine,
            node_gpus={name: every.get(name, 0) for name in members},
            window=window,
            metrics_error=gathered.series.error,
            spans=members,
        ),
        queue=queue_report(gathered.pods, gathered.nodes_then(), pool.name, window),
        failures=failure_report(mine, window, xids=gathered.xids),
        replacement=replacement_report(
            nodes,
            managed_labels=managed_label_keys(specs, pool_label_key()),
            managed_taints=managed_taint_keys(specs),
        ),
        members=_window_members(gathered, pool.name, members),
    )


def _window_members(
    gathered: Gathered, pool: str, members: Mapping[str, Sequence[Span]]
) -> WindowMembers:
    window, found = gathered.window, gathered.membership
    if found is None:
        return WindowMembers(len(members))
    return WindowMembers(
        nodes=len(members),
        changes=tuple(found.changes(pool, window.start, window.end)),
        assumed_before=found.assumed_before(pool, window.start, window.end),
    )


def _cache_key(kind: str, parts: tuple[object, ...]) -> str:
    return "insights:" + hashlib.sha256(repr((kind, *parts)).encode()).hexdigest()


def _kept(kind: str, parts: tuple[object, ...], compute: Callable[[], T]) -> T:
    """`compute()`, kept INSIGHTS_CACHE_SECONDS in the shared cache: weeks of history do not
    change much in minutes, and reading them costs seconds at 100,000 pods."""
    seconds = settings.INSIGHTS_CACHE_SECONDS
    if not seconds:
        return compute()
    key = _cache_key(kind, parts)
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, seconds)
    return found


def _pool_parts(pool: Pool, days: int) -> tuple[object, ...]:
    return (pool.pk, pool.updated_at, days)


def _advice_parts(days: int) -> tuple[object, ...]:
    # A pool edited (its target, its floor) changes the advice at once.
    return (days, *Pool.objects.active().values_list("pk", "updated_at"))


def pool_insights(
    pool: Pool, *, days: int, now: datetime
) -> tuple[PoolInsights, list[readiness.Check]]:
    """The pool's four indicators over the window (kept a while) and its readiness checks
    (always now)."""
    found = _kept(
        "pool", _pool_parts(pool, days), lambda: indicators(gather(days=days, now=now), pool)
    )
    return found, pool_readiness(pool, now=now)


@dataclass(frozen=True)
class PoolHistory:
    """A pool's utilisation charts: a point a step over the chart's range."""

    average: list[tuple[float, float]]
    idle_nodes: list[tuple[float, float]]
    nodes: int  # present now: the idle chart's top
    error: str | None


def pool_utilisation_history(pool: Pool, span: str) -> PoolHistory:
    """The pool's average utilisation and idle whole nodes over a chart's named range
    (charts.WINDOW_RANGES; UnknownRange else): the step keeps the number of points, and the
    queries sent, the same whatever the range. Read at each page view, not kept."""
    length, step = charts.time_range(span, charts.WINDOW_RANGES)
    end = datetime.now(UTC)
    start = end - length
    members = membership(start, end).members(pool.name, start.timestamp(), end.timestamp())
    down = Node.objects.present().filter(ready=False, name__in=list(members))
    series = metrics.pool_series(
        {pool.name: members},
        span=length,
        step=step,
        end=end,
        never_idle=set(down.values_list("name", flat=True)),
    )
    average = list(series.average.get(pool.name, []))
    idle = idle_nodes_each_step(average, series.idle_nodes.get(pool.name, []))
    present = sum(1 for spans in members.values() if spans[-1][1] is None)
    return PoolHistory(average, idle, present, series.error)


# --- the advisor ---


def _idle_parts(days: int) -> tuple[object, ...]:
    return (current_cluster(), *_advice_parts(days))


def _idle_here(gathered: Gathered) -> list[IdlePool]:
    return idle_pools(current_cluster(), [indicators(gathered, p) for p in gathered.pools])


def _idle_elsewhere(days: int, now: datetime) -> list[IdlePool]:
    """The under-used pools of every other cluster served, each read in its own scope and
    kept as long as its advice (its insights refresh keeps them ahead): one reading of each
    cluster's history at most, whatever the number of its pools or nodes."""
    here, found = current_cluster(), []
    for name in served_clusters():
        if name != here:
            with cluster_scope(name):
                found += _kept(
                    "idle", _idle_parts(days), lambda: _idle_here(gather(days=days, now=now))
                )
    return found


def _advise(
    gathered: Gathered, *, days: int, now: datetime
) -> tuple[list[advisor.Advice], dict[Pool, PoolInsights]]:
    per_pool = {p: indicators(gathered, p) for p in gathered.pools}
    found = advisor.advise(list(per_pool.values()))
    lent_to = {a.move.destination for a in found if a.move is not None}
    found += send_elsewhere_advice(list(per_pool.values()), lent_to, _idle_elsewhere(days, now))
    found.sort(key=lambda a: (-a.confidence, a.key))
    return previewed(found, now=_at(gathered.window.end)), per_pool


def advice(*, days: int, now: datetime, dismissed: bool = False) -> list[advisor.Advice]:
    """The advisor's suggestions over every active pool, without those dismissed on the
    same evidence (`dismissed`: with them)."""
    found = _kept(
        "advice",
        _advice_parts(days),
        lambda: _advise(gather(days=days, now=now), days=days, now=now)[0],
    )
    if dismissed:
        return found
    return advisor.visible(found, dict(AdviceDismissal.objects.values_list("key", "fingerprint")))


def insights_refresh(*, days: int, now: datetime) -> int:
    """Compute every pool's indicators and the advice from one reading of the history and
    keep them, so pages find them ready (the beat runs this ahead of their expiry).
    Returns the number of pools computed."""
    seconds = settings.INSIGHTS_CACHE_SECONDS
    if not seconds:
        return 0
    found, per_pool = _advise(gather(days=days, now=now), days=days, now=now)
    cache.set(_cache_key("advice", _advice_parts(days)), found, seconds)
    # What the other clusters' advisors read of this one (_idle_elsewhere), kept ahead too.
    idle = idle_pools(current_cluster(), list(per_pool.values()))
    cache.set(_cache_key("idle", _idle_parts(days)), idle, seconds)
    for pool, computed in per_pool.items():
        cache.set(_cache_key("pool", _pool_parts(pool, days)), computed, seconds)
    return len(per_pool)


# --- workload profiles ---


@dataclass(frozen=True)
class Profiles:
    window: Window
    by: str
    profiles: list[Profile]
    metrics_error: str | None


def profiles(*, days: int, by: str, now: datetime) -> Profiles:
    def compute() -> Profiles:
        window = window_of(days, now)
        peaks, error = metrics.framebuffer_peaks(days=days)
        xids, xid_error = xid_errors(days)
        found = workload_profiles(
            pod_records(window), window, by=by, framebuffer_peaks=peaks, xids=xids
        )
        return Profiles(window, by, found, error or xid_error)

    return _kept("profiles", (days, by), compute)


# --- readiness ---


def _live_pods(pool: Pool) -> list[readiness.LivePod]:
    return [
        readiness.LivePod(f"{ns}/{name}", node, gpus, pod_scheduling(selector, affinity, tols))
        for ns, name, node, gpus, selector, affinity, tols in GpuPod.objects.live()
        .filter(pool_label=pool.name)
        .exclude(node_name="")
        .values_list(
            "namespace", "name", "node_name", "units", "node_selector", "affinity", "tolerations"
        )
    ]


def _loans(pool: Pool) -> list[readiness.LoanFact]:
    """The pool's open loans, and those whose return left nodes lent (pools/moves/
    loan_returns.py): lent to it or from it."""
    lent_from = MoveItem.objects.filter(source_pool=pool).values("request")
    return [
        readiness.LoanFact(pk, _ts(until), count, len(left) if stuck else 0)
        for pk, until, count, stuck, left in MoveRequest.objects.filter(loan_until__isnull=False)
        .filter(ACTIVE_LOAN)
        .filter(Q(destination=pool) | Q(pk__in=lent_from))
        .annotate(count=Count("items"))
        .values_list("pk", "loan_until", "count", "loan_return_stuck_since", "loan_return_left")
    ]


def pool_readiness(
    pool: Pool, *, now: datetime, state: NodesNow | None = None
) -> list[readiness.Check]:
    state = state or nodes_now()
    nodes = [n for n in state.facts if n.pool == pool.name]
    taint = pool.taint
    rules = readiness.PoolRules(
        pool.name,
        pool_label_key(),
        (taint.key, taint.value, taint.effect) if taint is not None else None,
    )
    stale_after = now - timedelta(seconds=2 * settings.INVENTORY_SYNC_SECONDS)
    return [
        readiness.labels_and_taints(nodes),
        readiness.workloads_declare(_live_pods(pool), rules),
        readiness.system_reserved(nodes),
        readiness.metrics_arrive(nodes, state.metrics_error, metrics.COUNTERS),
        readiness.nodes_recognised(
            sorted(n.name for n in state.facts if n.pool is None),
            sorted(n.name for n in nodes if state.last_seen[n.name] < stale_after),
            settings.INVENTORY_SYNC_SECONDS,
        ),
        readiness.loans_end(_loans(pool), now.timestamp()),
    ]
