"""What a node must carry to be in a pool, and how that differs from what it carries (pure).

The portal manages a known set of label keys (the pool key and every pool's labels) and
taint keys (every pool's taint). Moving a node sets the target pool's labels and taint and
removes every *other* managed key: forgetting the old pool's taint would leave a moved node
carrying both taints, and no pod of either pool could land on it. Everything the portal does
not manage (GPU Feature Discovery labels, node.kubernetes.io taints, other teams' labels) is
kept as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pools.core.taints import Taint


@dataclass(frozen=True)
class PoolSpec:
    """A pool as the core sees it: its name, the labels and the taint its nodes carry."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taint: Taint | None = None


@dataclass(frozen=True)
class NodeState:
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]


@dataclass(frozen=True)
class NodeDiff:
    labels_added: Mapping[str, str] = field(default_factory=dict)
    labels_changed: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # old, new
    labels_removed: Mapping[str, str] = field(default_factory=dict)  # key -> old value
    taints_added: tuple[Taint, ...] = ()
    taints_removed: tuple[Taint, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not (
            self.labels_added
            or self.labels_changed
            or self.labels_removed
            or self.taints_added
            or self.taints_removed
        )

    @property
    def changes_taints(self) -> bool:
        return bool(self.taints_added or self.taints_removed)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form shown as the dry-run preview and stored with a move."""
        return {
            "labels_added": dict(self.labels_added),
            "labels_changed": {
                k: {"from": old, "to": new} for k, (old, new) in self.labels_changed.items()
            },
            "labels_removed": dict(self.labels_removed),
            "taints_added": [str(t) for t in self.taints_added],
            "taints_removed": [str(t) for t in self.taints_removed],
        }

    def summary(self) -> str:
        parts = [f"+{k}={v}" for k, v in sorted(self.labels_added.items())]
        parts += [
            f"~{k}={new} (was {old})" for k, (old, new) in sorted(self.labels_changed.items())
        ]
        parts += [f"-{k}" for k in sorted(self.labels_removed)]
        parts += [f"+taint {t}" for t in self.taints_added]
        parts += [f"-taint {t}" for t in self.taints_removed]
        return ", ".join(parts) if parts else "no change"


def managed_label_keys(pools: Iterable[PoolSpec], pool_key: str) -> frozenset[str]:
    keys = {pool_key}
    for pool in pools:
        keys.update(pool.labels)
    return frozenset(keys)


def managed_taint_keys(pools: Iterable[PoolSpec]) -> frozenset[str]:
    return frozenset(pool.taint.key for pool in pools if pool.taint is not None)


@dataclass(frozen=True)
class Target:
    """What a node is to carry, fixed when a move is asked and approved: the pool it goes to
    (None: out of every pool) and the keys the portal managed then. Applied later, it gives
    the approved change even if a pool definition was edited in between."""

    pool: PoolSpec | None
    label_keys: frozenset[str]
    taint_keys: frozenset[str]

    def as_dict(self) -> dict[str, Any]:
        pool = self.pool
        return {
            "pool": None
            if pool is None
            else {
                "name": pool.name,
                "labels": dict(pool.labels),
                "taint": pool.taint.to_api() if pool.taint else None,
            },
            "label_keys": sorted(self.label_keys),
            "taint_keys": sorted(self.taint_keys),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Target:
        raw = data.get("pool")
        pool = None
        if raw is not None:
            taint = Taint.from_api(raw["taint"]) if raw.get("taint") else None
            pool = PoolSpec(str(raw["name"]), dict(raw.get("labels") or {}), taint)
        return cls(pool, frozenset(data["label_keys"]), frozenset(data["taint_keys"]))


def move_target(
    target_pool: PoolSpec | None, all_pools: Sequence[PoolSpec], *, pool_key: str
) -> Target:
    """The target for `target_pool` under today's pool definitions."""
    pools = list(all_pools)
    if target_pool is not None and all(p.name != target_pool.name for p in pools):
        pools.append(target_pool)
    return Target(target_pool, managed_label_keys(pools, pool_key), managed_taint_keys(pools))


def target_state(
    node_labels: Mapping[str, str],
    node_taints: Sequence[Taint],
    target: Target,
    *,
    pool_key: str,
) -> NodeState:
    """The labels and taints the node must carry to meet `target`: every managed key off,
    then the target pool's on; everything else kept as it is."""
    labels = {k: v for k, v in node_labels.items() if k not in target.label_keys}
    taints = [t for t in node_taints if t.key not in target.taint_keys]
    if target.pool is not None:
        labels.update(target.pool.labels)
        labels[pool_key] = target.pool.name
        if target.pool.taint is not None:
            taints.append(target.pool.taint)
    return NodeState(labels, tuple(taints))


def desired_state(
    node_labels: Mapping[str, str],
    node_taints: Sequence[Taint],
    target_pool: PoolSpec | None,
    all_pools: Sequence[PoolSpec],
    *,
    pool_key: str,
) -> NodeState:
    """The labels and taints the node must carry to be in `target_pool` (None: in no pool)."""
    target = move_target(target_pool, all_pools, pool_key=pool_key)
    return target_state(node_labels, node_taints, target, pool_key=pool_key)


def node_diff(current: NodeState, desired: NodeState) -> NodeDiff:
    added = {k: v for k, v in desired.labels.items() if k not in current.labels}
    changed = {
        k: (current.labels[k], v)
        for k, v in desired.labels.items()
        if k in current.labels and current.labels[k] != v
    }
    removed = {k: v for k, v in current.labels.items() if k not in desired.labels}
    current_taints, desired_taints = set(current.taints), set(desired.taints)
    return NodeDiff(
        labels_added=added,
        labels_changed=changed,
        labels_removed=removed,
        taints_added=tuple(t for t in desired.taints if t not in current_taints),
        taints_removed=tuple(t for t in current.taints if t not in desired_taints),
    )


def pool_of(labels: Mapping[str, str], pools: Sequence[PoolSpec], pool_key: str) -> PoolSpec | None:
    name = labels.get(pool_key)
    return next((p for p in pools if p.name == name), None) if name else None


def drift(
    node_labels: Mapping[str, str],
    node_taints: Sequence[Taint],
    pools: Sequence[PoolSpec],
    *,
    pool_key: str,
) -> NodeDiff | None:
    """The change that would bring a node back to its pool's definition, or None if in line.

    A node without the pool label is unassigned, not drifted; a node whose pool label names
    no known pool is left to the inventory to flag.
    """
    pool = pool_of(node_labels, pools, pool_key)
    if pool is None:
        return None
    current = NodeState(dict(node_labels), tuple(node_taints))
    change = node_diff(
        current, desired_state(node_labels, node_taints, pool, pools, pool_key=pool_key)
    )
    return None if change.is_empty else change


def drift_record(
    node_labels: Mapping[str, str],
    node_taints: Sequence[Mapping[str, Any]],
    pools: Sequence[PoolSpec],
    *,
    known_pools: Collection[str],
    pool_key: str,
) -> dict[str, Any]:
    """What the inventory keeps as a node's drift: the diff back to its pool's definition
    (NodeDiff.as_dict()), {"unknown_pool": label} when its pool label names no pool in
    `known_pools`, or {} when the node is in line (or in no pool)."""
    label = node_labels.get(pool_key, "")
    if label and label not in known_pools:
        return {"unknown_pool": label}
    change = drift(node_labels, [Taint.from_api(t) for t in node_taints], pools, pool_key=pool_key)
    return change.as_dict() if change is not None else {}


def node_patch(diff: NodeDiff, desired: NodeState, resource_version: str) -> dict[str, Any]:
    """One strategic-merge patch body: label changes (None deletes) and, if the taints change,
    the complete new taint list (spec.taints has no merge key: the list is replaced whole),
    guarded by the resourceVersion the diff was computed from."""
    labels: dict[str, str | None] = {**diff.labels_added}
    labels.update({k: new for k, (_, new) in diff.labels_changed.items()})
    labels.update({k: None for k in diff.labels_removed})
    body: dict[str, Any] = {"metadata": {"resourceVersion": resource_version}}
    if labels:
        body["metadata"]["labels"] = labels
    if diff.changes_taints:
        body["spec"] = {"taints": [t.to_api() for t in desired.taints]}
    return body
