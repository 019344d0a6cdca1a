"""One node of a move, on the Kubernetes side only: read it, check it is still where the
request found it, drain it if asked, apply exactly the approved Target with one guarded
PATCH, and say what happened as an Outcome. Nothing here writes to the database, so many
nodes can run at once in threads; pools/moves/execution/run.py claims, records and finishes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pools.common.cluster_access import pool_label_key
from pools.common.errors import CapacityFloorReached, NodeMovedSinceRequest
from pools.core.checks import where_asked
from pools.core.desired import Target
from pools.core.snapshot import node_record
from pools.core.wording import counted
from pools.kube.nodes import Raw, read_node
from pools.kube.patcher import PatchResult, apply_target, plan

DONE, UNCHANGED, FAILED = "done", "unchanged", "failed"  # MoveItem.State's values


@dataclass(frozen=True)
class NodeWork:
    """What one claimed item asks, as plain data (read from its row before the work)."""

    item_id: int
    node: str
    source_label: str
    target: Target
    drain_first: bool
    planned_before: dict[str, Any]
    planned_diff: dict[str, Any]
    resumed: bool  # an earlier attempt claimed it: it may have sent the PATCH already
    cordoned_by_portal: bool
    capacity_failure: str | None = None  # the source pool's floor, decided at the claim
    raw: Raw | None = field(default=None, repr=False)  # the node as just listed, if it was


@dataclass
class Outcome:
    state: str
    message: str
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    applied: dict[str, Any] = field(default_factory=dict)
    raw: Raw | None = field(default=None, repr=False)  # the node as last seen, for the inventory
    later: list[str] = field(default_factory=list)  # events after the node's own (uncordon)


# Drain-first hooks, given by the caller: cordon (and record that the portal did), empty
# the node of its GPU pods, and uncordon. They touch the database, so drain-first nodes run
# one at a time in the worker's own thread.
Hooks = Callable[[NodeWork, Raw], None]


@dataclass(frozen=True)
class DrainHooks:
    cordon: Hooks
    empty: Hooks
    uncordon: Callable[[NodeWork, Raw], Raw]  # only what the portal cordoned; the node after
    # A reconfiguration's wait, after the PATCH and before the uncordon, for the node to
    # take its new layout (the node after); raises ReconfigurationFailed.
    settle: Callable[[NodeWork, Raw], Raw] | None = None


def _already(work: NodeWork, raw: Raw, hooks: DrainHooks | None) -> Outcome:
    """The node carries the approved state already."""
    if hooks is not None:
        if hooks.settle is not None:  # a resumed reconfiguration: its layout may be pending
            raw = hooks.settle(work, raw)
        raw = hooks.uncordon(work, raw)  # our own cordon from before a crash, never an operator's
    after = node_record(raw)
    if work.resumed and work.planned_before:
        # An earlier attempt died between its PATCH and its record: the change is this move's.
        return Outcome(
            DONE,
            "already in the approved state when resumed: the earlier attempt's PATCH, "
            "confirmed on resume",
            before=work.planned_before,
            after=after,
            applied=work.planned_diff,
            raw=raw,
        )
    return Outcome(
        UNCHANGED,
        "already as the destination wants it: no PATCH sent",
        before=after,
        after=after,
        raw=raw,
    )


def node_outcome(work: NodeWork, hooks: DrainHooks | None = None) -> Outcome:
    """Apply `work` to its node. Raises KubeError (transient or not) and NodeNotMoved for
    the caller to record; `hooks` are required for a drain-first node."""
    raw = work.raw if work.raw is not None else read_node(work.node)
    _, _, diff = plan(raw, work.target)
    if diff.is_empty:
        return _already(work, raw, hooks)
    label = ((raw.get("metadata") or {}).get("labels") or {}).get(pool_label_key(), "")
    if moved := where_asked(work.node, work.source_label, label):
        raise NodeMovedSinceRequest(moved[0].message)
    if work.capacity_failure:
        raise CapacityFloorReached(work.capacity_failure)
    before = node_record(raw)
    fresh: Raw | None = raw
    if work.drain_first:
        if hooks is None:
            raise TypeError("a drain-first node needs the drain hooks")
        hooks.cordon(work, raw)
        hooks.empty(work, raw)
        fresh = None  # the drain took time: read the node again before the PATCH
    result = apply_target(work.node, work.target, raw=fresh)
    raw = result.raw
    if work.drain_first and hooks is not None:
        if hooks.settle is not None:
            raw = hooks.settle(work, raw)
        raw = hooks.uncordon(work, raw)
    return Outcome(
        DONE if result.patched else UNCHANGED,
        result.diff.summary() + _patch_notes(result),
        before=before,
        after=node_record(raw),
        applied=result.diff.as_dict(),
        raw=raw,
    )


def _patch_notes(result: PatchResult) -> str:
    notes = [f"{counted(result.conflicts, 'conflict')} re-read"] if result.conflicts else []
    if result.answer_lost:
        notes.append("the PATCH's answer was lost; the node read back shows it applied")
    return f" ({'; '.join(notes)})" if notes else ""
