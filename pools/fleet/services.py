"""Writes to pool definitions: save, retire and restore. None touches a node: moving nodes
is pools.moves'."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from pools.core.cluster_scope import cluster_scope
from pools.core.palette import colour_pick
from pools.inventory import drift_recompute
from pools.models import Node, Pool


class PoolInUse(ValidationError):
    pass


@dataclass(frozen=True)
class PoolSaved:
    pool: Pool
    drifted_nodes: int


@transaction.atomic
def pool_save(*, pool: Pool) -> PoolSaved:
    """Create or update a pool. Never touches nodes: the nodes the change affects show as
    drifted until they are reconciled through the move workflow."""
    pool.colour = pool.colour.strip().lower()
    if not pool.colour:
        pool.colour = colour_pick(Pool.objects.exclude(pk=pool.pk).values_list("colour", flat=True))
    pool.full_clean()
    pool.save()
    return PoolSaved(pool, drift_recompute())


@transaction.atomic
def pool_restore(*, pool: Pool) -> Pool:
    """Bring a retired pool back as it was; refused (ValidationError) when its definition
    now clashes with an active pool's, as a new pool would be."""
    locked = Pool.objects.select_for_update().get(pk=pool.pk)
    if locked.retired_at is not None:
        locked.retired_at = None
        locked.full_clean()
        locked.save(update_fields=["retired_at", "updated_at"])
        drift_recompute()
    return locked


@transaction.atomic
def pool_retire(*, pool: Pool) -> Pool:
    locked = Pool.objects.select_for_update().get(pk=pool.pk)
    holding = Node.objects.present().filter(pool=locked).count()
    if holding:
        raise PoolInUse(
            f"Pool {locked.name!r} still holds {holding} node{'s' if holding != 1 else ''}: "
            "move them to another pool before retiring it.",
            code="pool_in_use",
        )
    if locked.retired_at is None:
        locked.retired_at = timezone.now()
        locked.save(update_fields=["retired_at", "updated_at"])
        drift_recompute()
    return locked


def pools_copy(*, source: str, target: str) -> list[Pool]:
    """Give cluster `target` the active pools of cluster `source` it lacks, with the same
    definitions (a new cluster of the fleet starts with the pools the others have). Each is
    checked and saved as any new pool is, inside `target`'s scope; nodes are not touched."""
    made = []
    with cluster_scope(target):
        taken = set(Pool.objects.values_list("name", flat=True))
        for pool in Pool.everywhere.active().filter(cluster=source).order_by("name"):
            if pool.name in taken:
                continue
            copy = Pool(cluster=target, **{f: getattr(pool, f) for f in Pool.EDITABLE_FIELDS})
            made.append(pool_save(pool=copy).pool)
    return made
