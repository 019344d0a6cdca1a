"""The rules a move must pass, at request time and again at execution (pure).

Plain facts in, failures out: whoever gathers the facts (the database, the API server, the
metrics) decides nothing here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pools.core.mig_configs import mig_config_problem
from pools.core.plugin_configs import PluginConfig, plugin_config_problem
from pools.core.wording import counted


@dataclass(frozen=True)
class NodeFacts:
    name: str
    present: bool  # in the inventory and not gone
    pool: str | None  # the pool the node is in now (by its label)
    gpu_model: str = ""
    drifted: bool = False
    active_move: int | None = None  # another request that holds the node
    maintenance: int | None = None  # a maintenance that still has the node to do
    xid_gpus: int | None = None  # None: unknown (no metrics)
    has_metrics: bool | None = None  # None: Prometheus unavailable
    layouts: tuple[str, ...] = ()  # how it offers its GPUs (pools.core.devices.node_layouts)
    mig_capable: bool = False  # GFD's nvidia.com/mig.capable
    # Not present in the destination's cluster, but in these: a node never changes clusters.
    other_clusters: tuple[str, ...] = ()


@dataclass(frozen=True)
class PoolFacts:
    name: str
    min_nodes: int = 0
    accepted_models: tuple[str, ...] = ()
    requires_healthy: bool = False
    present_nodes: int = 0
    leaving: int = 0  # nodes already on their way out in other active moves
    accepted_layouts: tuple[str, ...] = ()  # empty: any
    cluster: str = ""


@dataclass(frozen=True)
class CheckFailure:
    node: str | None  # None: the request as a whole
    code: str
    message: str
    field: str | None = None  # the input field at fault: bad input (400), not a refusal (409)

    def as_dict(self) -> dict[str, str | None]:
        return {"node": self.node, "code": self.code, "message": self.message, "field": self.field}


@dataclass(frozen=True)
class AskFacts:
    """What the request itself says, beside its nodes. `now` is given, never read here."""

    reason: str
    node_count: int
    drain_policy: str
    drain_policies: tuple[str, ...]
    drain_deadline_seconds: int
    max_drain_seconds: int  # a drain must end before the worker's task time limit
    loan_until: datetime | None
    now: datetime
    reconcile: bool = False
    destination: str = ""
    destination_retired: bool = False
    mig_config: str = ""  # a reconfigure's MIG configuration
    plugin_config: str = ""  # or its device plugin (sharing) configuration


# What a drain-first node needs besides its drain, within one task: the PATCH, the uncordon,
# the records, and the pods' final reports (pools/moves/execution/run.py's termination slack).
DRAIN_TASK_MARGIN_SECONDS = 60
MIN_DRAIN_SECONDS = 1


def max_drain_seconds(task_soft_time_limit: int) -> int:
    """The longest drain deadline a worker can honour: a drain that outlives its task is
    killed mid-way and handed to another worker while the node is still cordoned."""
    return max(MIN_DRAIN_SECONDS, task_soft_time_limit - DRAIN_TASK_MARGIN_SECONDS)


def _fail(field: str, message: str) -> CheckFailure:
    return CheckFailure(None, "validation", message, field)


def ask_failures(ask: AskFacts) -> list[CheckFailure]:
    """What is wrong with the request itself, one failure a field."""
    failures = []
    if not ask.reason.strip():
        failures.append(_fail("reason", "A move needs a reason."))
    if not ask.node_count:
        failures.append(_fail("nodes", "Choose at least one node."))
    if ask.drain_policy not in ask.drain_policies:
        failures.append(
            _fail(
                "drain_policy",
                f"{ask.drain_policy!r} is not a drain policy: use "
                f"{' or '.join(ask.drain_policies)}.",
            )
        )
    if not MIN_DRAIN_SECONDS <= ask.drain_deadline_seconds <= ask.max_drain_seconds:
        failures.append(
            _fail(
                "drain_deadline_seconds",
                f"A drain deadline must be between {MIN_DRAIN_SECONDS} and "
                f"{ask.max_drain_seconds} seconds (the worker's task time limit less "
                f"{DRAIN_TASK_MARGIN_SECONDS} s); got {ask.drain_deadline_seconds}.",
            )
        )
    if ask.loan_until is not None and ask.reconcile:
        failures.append(_fail("loan_until", "A reconcile cannot be a loan."))
    elif ask.loan_until is not None and (ask.mig_config or ask.plugin_config):
        failures.append(_fail("loan_until", "A reconfiguration cannot be a loan."))
    elif ask.loan_until is not None and ask.loan_until <= ask.now:
        failures.append(_fail("loan_until", "A loan must end in the future."))
    if ask.destination_retired:
        failures.append(_fail("destination", f"Pool {ask.destination} is retired."))
    return failures


def loan_failures(nodes: Sequence[NodeFacts]) -> list[CheckFailure]:
    """A loan must have somewhere to go back to, or it would silently become permanent."""
    return [
        CheckFailure(
            n.name,
            "loan_without_pool",
            f"{n.name} is in no pool: a loan needs a pool to return it to.",
        )
        for n in nodes
        if n.present and n.pool is None
    ]


def where_asked(node: str, source_label: str, label_now: str) -> list[CheckFailure]:
    """At execution: the node is still in the pool the request moved it from."""
    if label_now == source_label:
        return []
    return [
        CheckFailure(
            node,
            "moved_since_request",
            f"node changed since the request: it was in {source_label or 'no pool'}"
            f" and is now in {label_now or 'no pool'}",
        )
    ]


def _reconcile_failures(node: NodeFacts, destination: PoolFacts) -> list[CheckFailure]:
    """A reconcile only brings a drifted node back to the pool it is in."""
    if node.pool != destination.name:
        return [
            CheckFailure(
                node.name,
                "not_in_pool",
                f"{node.name} is not in pool {destination.name}: reconcile only brings a "
                "node back to the pool it is in.",
            )
        ]
    if not node.drifted:
        return [
            CheckFailure(
                node.name,
                "not_drifted",
                f"{node.name} already matches pool {destination.name}: nothing to reconcile.",
            )
        ]
    return []


def _fit_failures(node: NodeFacts, destination: PoolFacts) -> list[CheckFailure]:
    """Whether the destination takes the node at all: not the pool it is in, and a GPU
    model the pool accepts."""
    failures = []
    if node.pool == destination.name:
        failures.append(
            CheckFailure(
                node.name, "same_pool", f"{node.name} is already in pool {destination.name}."
            )
        )
    if destination.accepted_models and node.gpu_model not in destination.accepted_models:
        accepted = ", ".join(destination.accepted_models)
        failures.append(
            CheckFailure(
                node.name,
                "gpu_model",
                f"{node.name} has {node.gpu_model or 'an unknown GPU'}; pool "
                f"{destination.name} accepts only {accepted}.",
            )
        )
    refused = [x for x in node.layouts if x not in destination.accepted_layouts]
    if destination.accepted_layouts and refused:
        failures.append(
            CheckFailure(
                node.name,
                "gpu_layout",
                f"{node.name} offers its GPUs as {', '.join(refused)}; pool "
                f"{destination.name} accepts only {', '.join(destination.accepted_layouts)} "
                "(reconfigure the node first, or accept the layout in the pool).",
            )
        )
    return failures


def _health_failures(node: NodeFacts, destination: PoolFacts) -> list[CheckFailure]:
    """A pool that requires healthy nodes refuses a node whose health is unknown, whose
    monitoring is missing, or that has XID errors (an override reason lifts this)."""
    why = f"Pool {destination.name} requires healthy nodes and"
    override = "give an override reason to move it anyway."
    if node.has_metrics is None:
        code, problem = "health_unknown", f"{node.name}'s metrics are unavailable"
    elif not node.has_metrics:
        code, problem = "no_metrics", f"no DCGM metrics arrive for {node.name}"
    elif node.xid_gpus:
        code, problem = (
            "xid_errors",
            f"{node.name} has {counted(node.xid_gpus, 'GPU')} with XID errors",
        )
    else:
        return []
    return [CheckFailure(node.name, code, f"{why} {problem}: {override}")]


@dataclass(frozen=True)
class Reconfiguration:
    """What a reconfigure asks of its nodes: a MIG configuration (`mig_config`, of the
    known ones or the site's `named`) or a device plugin configuration (`plugin_config`, of
    the site's `plugin_configs`)."""

    mig_config: str = ""
    named: Collection[str] = ()
    plugin_config: str = ""
    plugin_configs: Mapping[str, PluginConfig] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.mig_config or self.plugin_config)


def _reconfigure_failures(
    node: NodeFacts, destination: PoolFacts, asked: Reconfiguration
) -> list[CheckFailure]:
    """A reconfiguration changes a node's MIG layout or GPU sharing in the pool it is in."""
    if node.pool != destination.name:
        where = f"pool {node.pool}" if node.pool else "no pool"
        return [
            CheckFailure(
                node.name,
                "not_in_pool",
                f"{node.name} is in {where}: a reconfiguration keeps a node in its pool "
                f"({destination.name} was asked); move it first.",
            )
        ]
    if asked.plugin_config:
        problem = plugin_config_problem(
            asked.plugin_config, known=asked.plugin_configs, layouts=node.layouts
        )
        field_name = "plugin_config"
    else:
        problem = mig_config_problem(
            asked.mig_config, model=node.gpu_model, mig_capable=node.mig_capable, named=asked.named
        )
        field_name = "mig_config"
    if problem:
        return [CheckFailure(node.name, field_name, f"{node.name}: {problem}.", field_name)]
    return []


def _other_cluster(node: NodeFacts, destination: PoolFacts) -> CheckFailure:
    # A node's cluster is where its kubelet registered: no label moves it, so the move is
    # refused whole rather than left to fail on an API server that has no such node.
    theirs = " and ".join(node.other_clusters)
    return CheckFailure(
        node.name,
        "other_cluster",
        f"{node.name} is a node of cluster {theirs}, and pool {destination.name} is in cluster "
        f"{destination.cluster}: a move stays inside its cluster. Move it to a pool of "
        f"{theirs}, or send the work to cluster {theirs} instead.",
    )


def _node_failures(
    node: NodeFacts,
    destination: PoolFacts,
    *,
    reconcile: bool,
    health_override: str,
    reconfiguration: Reconfiguration | None = None,
) -> list[CheckFailure]:
    if not node.present and node.other_clusters:
        return [_other_cluster(node, destination)]
    if not node.present:
        return [CheckFailure(node.name, "node_not_found", f"{node.name} is not a known GPU node.")]
    failures = []
    if node.active_move is not None:
        failures.append(
            CheckFailure(
                node.name,
                "active_move",
                f"{node.name} already has an active move (#{node.active_move}): one at a time.",
            )
        )
    if node.maintenance is not None:
        failures.append(
            CheckFailure(
                node.name,
                "in_maintenance",
                f"{node.name} is in maintenance #{node.maintenance}: move it when that is done "
                "or cancelled.",
            )
        )
    if reconcile:
        return failures + _reconcile_failures(node, destination)
    if reconfiguration:
        return failures + _reconfigure_failures(node, destination, reconfiguration)
    failures += _fit_failures(node, destination)
    if destination.requires_healthy and not health_override:
        failures += _health_failures(node, destination)
    return failures


def move_checks(
    nodes: Sequence[NodeFacts],
    destination: PoolFacts,
    sources: dict[str, PoolFacts],
    *,
    reconcile: bool = False,
    health_override: str = "",
    reconfiguration: Reconfiguration | None = None,
) -> list[CheckFailure]:
    """Every reason the move may not be asked, node by node, then the source pools'
    floors (a reconcile or a reconfiguration moves nothing out of a pool)."""
    failures: list[CheckFailure] = []
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            failures.append(CheckFailure(node.name, "duplicate", f"{node.name} is listed twice."))
            continue
        seen.add(node.name)
        failures += _node_failures(
            node,
            destination,
            reconcile=reconcile,
            health_override=health_override,
            reconfiguration=reconfiguration,
        )
    if not reconcile and not reconfiguration:
        failures += capacity_floor(nodes, destination, sources)
    return failures


def capacity_floor(
    nodes: Sequence[NodeFacts], destination: PoolFacts, sources: dict[str, PoolFacts]
) -> list[CheckFailure]:
    """The source pools keep at least their minimum after every active move, this one too."""
    leaving = Counter(n.pool for n in nodes if n.present and n.pool and n.pool != destination.name)
    failures = []
    for name, count in sorted(leaving.items()):
        pool = sources.get(name)
        if pool is None:
            continue
        remaining = pool.present_nodes - pool.leaving - count
        if remaining < pool.min_nodes:
            already = f", {pool.leaving} already leaving in other moves" if pool.leaving else ""
            failures.append(
                CheckFailure(
                    None,
                    "capacity_floor",
                    f"Pool {name} would keep {counted(remaining, 'node')}, below its minimum of "
                    f"{pool.min_nodes} ({pool.present_nodes} now{already}, {count} in this "
                    "request).",
                )
            )
    return failures
