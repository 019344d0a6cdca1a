"""Making one node match its pool: read, compute, and at most one guarded PATCH per try.

The PATCH carries the node's `metadata.resourceVersion`, so a writer that changed the node
between our read and our write makes the API server answer 409 instead of one of us
silently losing (spec.taints is replaced whole). On 409 the node is read again and the
change recomputed; an unchanged node costs one GET and no PATCH.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from kubernetes.client.exceptions import ApiException

from pools.common import observability
from pools.common.cluster_access import pool_label_key
from pools.core.desired import (
    NodeDiff,
    NodeState,
    PoolSpec,
    Target,
    move_target,
    node_diff,
    node_patch,
    target_state,
)
from pools.core.taints import Taint
from pools.kube.errors import KubeError
from pools.kube.nodes import Raw, read_node
from pools.kube.retry import RetryPolicy
from pools.kube.session import node_session


class PatchConflict(KubeError):
    """The node kept changing under us: every re-read and retry met another writer."""


class PatchNotApplied(KubeError):
    """The API server accepted the PATCH but the node does not show the change."""


@dataclass
class PatchResult:
    node: str
    diff: NodeDiff
    before: NodeState
    after: NodeState
    patched: bool  # False: nothing to change
    conflicts: int = 0
    answer_lost: bool = False  # the PATCH went through, its answer did not (seen on re-read)
    raw: Raw = field(default_factory=dict, repr=False)  # the node as the API server left it


def node_state(raw: Raw) -> NodeState:
    labels = dict((raw.get("metadata") or {}).get("labels") or {})
    taints = tuple(Taint.from_api(t) for t in (raw.get("spec") or {}).get("taints") or [])
    return NodeState(labels, taints)


def plan(
    raw: Raw, target: PoolSpec | Target | None, pools: Sequence[PoolSpec] = ()
) -> tuple[NodeState, NodeState, NodeDiff]:
    """The node's state, the state `target` wants, and the difference. `target` is a pool
    (with today's definitions in `pools`) or a Target fixed earlier."""
    current = node_state(raw)
    if not isinstance(target, Target):
        target = move_target(target, pools, pool_key=pool_label_key())
    desired = target_state(current.labels, current.taints, target, pool_key=pool_label_key())
    return current, desired, node_diff(current, desired)


def apply_pool(name: str, target: PoolSpec | None, pools: Sequence[PoolSpec]) -> PatchResult:
    """Bring node `name` to `target`'s desired state (None: out of every pool) under today's
    pool definitions."""
    return apply_target(name, move_target(target, pools, pool_key=pool_label_key()))


def apply_target(name: str, target: Target, *, raw: Raw | None = None) -> PatchResult:
    """Bring node `name` to `target`; gives up after PATCH_MAX_CONFLICTS conflicts in a row.
    `raw`: the node as just read, to save the first GET; after a 409 it is read again."""
    policy = RetryPolicy()
    allowed_conflicts = settings.PATCH_MAX_CONFLICTS
    conflicts = 0
    lost: tuple[NodeDiff, NodeState] | None = None  # a PATCH that may have gone through
    while True:
        if raw is None:
            raw = read_node(name)
        current, desired, diff = plan(raw, target)
        if diff.is_empty and lost is not None:
            # The API server applied an earlier try and its answer was lost (a timeout, a
            # dropped connection); the retry met our own change as a 409. The change is ours.
            sent, before = lost
            return PatchResult(
                name, sent, before, current, True, conflicts=conflicts, answer_lost=True, raw=raw
            )
        if diff.is_empty:
            return PatchResult(
                name, diff, current, current, patched=False, conflicts=conflicts, raw=raw
            )
        body = node_patch(diff, desired, raw["metadata"]["resourceVersion"])
        raw = None  # whatever happens next, the node is read again before another PATCH
        sends = _CountedSend(name, body)
        try:
            answer = policy.call(sends, doing=f"patching node {name}")
        except ApiException as exc:
            if exc.status != 409:
                raise
            if sends.count > 1:  # a try before this one failed without an answer
                lost = lost or (diff, current)
            conflicts += 1
            if conflicts > allowed_conflicts:
                raise PatchConflict(
                    f"patching node {name}: the node changed under us {conflicts} times in a "
                    "row (409 Conflict); another controller may be fighting over its labels"
                ) from exc
            continue
        after = node_state(answer)
        remaining = node_diff(after, desired)
        if not remaining.is_empty:
            raise PatchNotApplied(
                f"patching node {name}: the API server accepted the change but the node still "
                f"differs: {remaining.summary()}"
            )
        return PatchResult(
            name, diff, current, after, patched=True, conflicts=conflicts, raw=answer
        )


@dataclass
class _CountedSend:
    """One PATCH body, sent as often as the retry policy asks; counts the tries."""

    name: str
    body: dict[str, Any]
    count: int = 0

    def __call__(self) -> Raw:
        self.count += 1
        return _send_patch(self.name, self.body)


def _send_patch(name: str, body: dict[str, Any]) -> Raw:
    return observability.kube_patch_sent(node_session().patch, name, body)
