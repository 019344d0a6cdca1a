"""Break-glass: a pool admin puts one node in a pool now, outside the move workflow.

For when the workflow cannot serve (the approvers are away and a node must move): the same
desired state, the same guarded PATCH (pools/kube/patcher.py) and the same inventory refresh
as an approved move, recorded in the audit log as a break-glass step by the named admin.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from pools.audit import audit
from pools.common.roles import Capability, has_capability
from pools.core.desired import NodeDiff
from pools.core.snapshot import node_record
from pools.fleet.targets import active_pool_specs
from pools.inventory import inventory_refresh_node
from pools.kube.errors import KubeRefused
from pools.kube.nodes import read_node
from pools.kube.patcher import apply_pool, plan
from pools.models import MoveItem, Pool


class BreakGlassRefused(Exception):
    """The assignment cannot be made; the message says why."""


@dataclass(frozen=True)
class Assignment:
    node: str
    pool: str
    diff: NodeDiff
    patched: bool  # False: a dry run, or nothing to change


def _operator(username: str) -> AbstractBaseUser:
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise BreakGlassRefused(f"No active user {username!r}.")
    if not has_capability(user, Capability.EDIT_POOLS):
        raise BreakGlassRefused(f"{username} is not a pool admin: break-glass needs one.")
    return user


def _read(node_name: str) -> dict:  # type: ignore[type-arg]
    try:
        return read_node(node_name)
    except KubeRefused as exc:
        if exc.status == 404:
            raise BreakGlassRefused(f"No node {node_name!r} in the cluster.") from exc
        raise


def node_assign(*, node_name: str, pool_name: str, username: str, dry_run: bool) -> Assignment:
    """Put `node_name` in pool `pool_name` now (or only say what would change)."""
    operator = _operator(username)
    pool = Pool.objects.active().filter(name=pool_name).first()
    if pool is None:
        known = ", ".join(Pool.objects.active().values_list("name", flat=True))
        raise BreakGlassRefused(f"No pool {pool_name!r}; the pools are: {known}.")
    holder = MoveItem.objects.filter(active=True, node__name=node_name).first()
    if holder is not None:
        raise BreakGlassRefused(
            f"Move #{holder.request_id} holds {node_name}: cancel it or let it finish first."
        )
    pools = active_pool_specs()
    raw = _read(node_name)
    _, _, diff = plan(raw, pool.spec(), pools)
    if dry_run or diff.is_empty:
        return Assignment(node_name, pool.name, diff, patched=False)
    result = apply_pool(node_name, pool.spec(), pools)
    inventory_refresh_node(result.raw)
    audit(
        "node.break_glass",
        actor=operator,
        node_name=node_name,
        message=f"break-glass: put in pool {pool.name} outside the move workflow: "
        f"{result.diff.summary()}",
        before=node_record(raw),
        after=node_record(result.raw),
    )
    return Assignment(node_name, pool.name, result.diff, patched=result.patched)
