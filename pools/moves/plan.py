"""What a move would do: the facts the checks need, gathered from the database and the
metrics, the checks' verdict, and the diff each node would get. Creates nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, F

from pools.common.cluster_access import pool_label_key
from pools.core.checks import (
    AskFacts,
    CheckFailure,
    NodeFacts,
    PoolFacts,
    Reconfiguration,
    ask_failures,
    loan_failures,
    max_drain_seconds,
    move_checks,
)
from pools.core.desired import NodeState, PoolSpec, desired_state, node_diff
from pools.core.devices import node_layouts
from pools.core.figures import NodeMetrics
from pools.core.taints import Taint
from pools.metrics.node_figures import latest_node_metrics
from pools.models import Maintenance, MaintenanceNode, MoveItem, MoveRequest, Node, Pool


@dataclass(frozen=True)
class PlannedNode:
    node: Node
    diff: dict[str, Any]
    summary: str
    gpu_pods: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    desired: NodeState  # the labels and taints the node carries after the move


@dataclass(frozen=True)
class MovePlan:
    destination: Pool
    nodes: list[PlannedNode]
    failures: list[CheckFailure]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def field_errors(self) -> dict[str, str]:
        """The failures that are bad input, by field (the API's 400)."""
        fields: dict[str, str] = {}
        for failure in self.failures:
            if failure.field is not None:
                fields.setdefault(failure.field, failure.message)
        return fields


def pool_facts(pools: Sequence[Pool]) -> dict[str, PoolFacts]:
    """Each pool's rules and numbers: nodes present, and nodes already on their way out in
    active moves (counted against the pool's minimum)."""
    # Counted by pool id: pools of two clusters may share a name.
    ids = [p.pk for p in pools]
    present = dict(
        Node.objects.present().filter(pool__in=ids).values_list("pool_id").annotate(n=Count("id"))
    )
    leaving_qs = (
        MoveItem.objects.filter(active=True, source_pool__in=ids)
        .exclude(state__in=MoveItem.FINISHED)
        .exclude(source_pool_id=F("request__destination_id"))
    )
    leaving = dict(leaving_qs.values_list("source_pool_id").annotate(n=Count("id")))
    return {
        p.name: PoolFacts(
            p.name,
            p.min_nodes,
            tuple(p.accepted_gpu_models),
            p.requires_healthy_nodes,
            present.get(p.pk, 0),
            leaving.get(p.pk, 0),
            tuple(p.accepted_gpu_layouts or ()),
            p.cluster,
        )
        for p in pools
    }


def _other_clusters(names: Sequence[str], cluster: str) -> dict[str, tuple[str, ...]]:
    """The clusters other than `cluster` that have a present node of each name (asked only
    for names the destination's cluster lacks: no query in the usual case)."""
    if not names:
        return {}
    found: dict[str, list[str]] = {}
    rows = (
        Node.everywhere.present()
        .filter(name__in=names)
        .exclude(cluster=cluster)
        .order_by("cluster")
        .values_list("name", "cluster")
    )
    for name, other in rows:
        found.setdefault(name, []).append(other)
    return {name: tuple(clusters) for name, clusters in found.items()}


def node_facts(names: Sequence[str], destination: Pool) -> tuple[list[NodeFacts], dict[str, Node]]:
    """The facts about each named node of the destination's cluster (in the order given),
    and the rows found."""
    rows = {
        n.name: n
        for n in Node.objects.present()
        .select_related("pool")
        .filter(cluster=destination.cluster, name__in=names)
    }
    elsewhere = _other_clusters([n for n in names if n not in rows], destination.cluster)
    holders = dict(
        MoveItem.objects.filter(
            active=True, node__cluster=destination.cluster, node__name__in=names
        ).values_list("node__name", "request_id")
    )
    maintained = dict(
        MaintenanceNode.objects.filter(
            maintenance__state__in=Maintenance.ACTIVE_STATES,
            state__in=MaintenanceNode.UNFINISHED,
            node__cluster=destination.cluster,
            node__name__in=names,
        ).values_list("node__name", "maintenance_id")
    )
    metrics: Mapping[str, NodeMetrics] = {}
    available: bool | None = None
    if destination.requires_healthy_nodes:  # only then are the metrics worth asking for
        result, metrics = latest_node_metrics()
        available = result.available
    facts = []
    for name in names:
        node = rows.get(name)
        if node is None:
            facts.append(
                NodeFacts(name, present=False, pool=None, other_clusters=elsewhere.get(name, ()))
            )
            continue
        m = metrics.get(name)
        facts.append(
            NodeFacts(
                name,
                present=True,
                pool=node.pool.name if node.pool else None,
                gpu_model=node.gpu_model,
                drifted=node.drifted,
                active_move=holders.get(name),
                maintenance=maintained.get(name),
                xid_gpus=m.xid_gpus if m else None,
                has_metrics=(m is not None) if available else None,
                layouts=node_layouts(node.device_set()),
                mig_capable=(node.labels or {}).get("nvidia.com/mig.capable") == "true",
            )
        )
    return facts, rows


def _planned(node: Node, destination: PoolSpec, pools: Sequence[PoolSpec]) -> PlannedNode:
    current = NodeState(node.labels, tuple(Taint.from_api(t) for t in node.taints))
    desired = desired_state(
        current.labels, current.taints, destination, pools, pool_key=pool_label_key()
    )
    diff = node_diff(current, desired)
    pods = sorted(node.pods, key=lambda p: (-p["gpus"], p["namespace"], p["name"]))
    return PlannedNode(
        node, diff.as_dict(), diff.summary(), [p for p in pods if p["gpus"]], pods, desired
    )


@dataclass(frozen=True)
class MoveAsk:
    """Everything a move request says: the page's preview, the API's dry run and the request
    itself check the same thing."""

    node_names: Sequence[str]
    destination: Pool
    reason: str
    drain_policy: str = MoveRequest.DrainPolicy.LEAVE_RUNNING
    drain_deadline_seconds: int = 1800
    loan_until: datetime | None = None
    health_override: str = ""
    reconcile: bool = False
    mig_config: str = ""  # a reconfiguration: the MIG configuration the nodes are to take
    plugin_config: str = ""  # or the device plugin (sharing) configuration


# What a reconfiguration writes beside the configuration: the state the MIG manager moves
# on to success or failed. Written "pending" with the configuration, a stale "success" from
# the last layout can never be read as this one's (pools/moves/execution/reconfigure.py).
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"


def target_spec(ask: MoveAsk) -> PoolSpec:
    """What the nodes are to carry: the destination's definition and, for a
    reconfiguration, the MIG configuration asked for (its state pending) or the device
    plugin's configuration."""
    spec = ask.destination.spec()
    if ask.plugin_config:
        labels = {**spec.labels, PLUGIN_CONFIG_LABEL: ask.plugin_config}
        return PoolSpec(spec.name, labels, spec.taint)
    if not ask.mig_config:
        return spec
    labels = {**spec.labels, MIG_CONFIG_LABEL: ask.mig_config, MIG_STATE_LABEL: "pending"}
    return PoolSpec(spec.name, labels, spec.taint)


def ask_facts(ask: MoveAsk, now: datetime) -> AskFacts:
    return AskFacts(
        reason=ask.reason,
        node_count=len(ask.node_names),
        drain_policy=ask.drain_policy,
        drain_policies=tuple(MoveRequest.DrainPolicy.values),
        drain_deadline_seconds=ask.drain_deadline_seconds,
        max_drain_seconds=max_drain_seconds(settings.CELERY_TASK_SOFT_TIME_LIMIT),
        loan_until=ask.loan_until,
        now=now,
        reconcile=ask.reconcile,
        destination=ask.destination.name,
        destination_retired=ask.destination.retired_at is not None,
        mig_config=ask.mig_config,
        plugin_config=ask.plugin_config,
    )


def move_plan(*, ask: MoveAsk, now: datetime) -> MovePlan:
    """The dry run: the diff each node would get, its pods, and every check's verdict (the
    request's own fields included). Creates nothing; the page and the API show it before
    anything is submitted, and the request refuses exactly what it lists."""
    destination = ask.destination
    facts, rows = node_facts(ask.node_names, destination)
    pools = list(Pool.objects.active().filter(cluster=destination.cluster))
    facts_by_pool = pool_facts(pools)
    failures = ask_failures(ask_facts(ask, now))
    failures += move_checks(
        facts,
        facts_by_pool.get(destination.name, PoolFacts(destination.name)),
        facts_by_pool,
        reconcile=ask.reconcile,
        health_override=ask.health_override,
        reconfiguration=Reconfiguration(
            ask.mig_config, settings.MIG_CONFIGS, ask.plugin_config, settings.DEVICE_PLUGIN_CONFIGS
        ),
    )
    if ask.loan_until is not None:
        failures += loan_failures(facts)
    specs = [p.spec() for p in pools]
    planned = [
        _planned(rows[name], target_spec(ask), specs)
        for name in dict.fromkeys(ask.node_names)
        if name in rows
    ]
    return MovePlan(destination, planned, failures)
