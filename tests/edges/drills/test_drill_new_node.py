"""The new-node drill against kubesim: a GPU node with no pool label joins; the inventory sync
that runs during the hold must show it as unassigned (and the readiness checks flag it);
then it is deleted and its row marked gone, whatever the checks found."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from kubernetes.client.exceptions import ApiException

from pools import drills
from pools.common.errors import InvalidInput
from pools.insights.gather import pool_readiness
from pools.inventory import inventory_sync
from pools.models import AuditEvent, Drill, Node, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


@pytest.fixture
def portal(cluster: Kubesim, settings) -> Kubesim:  # type: ignore[no-untyped-def]
    settings.INVENTORY_SYNC_SECONDS = 10
    inventory_sync()
    return cluster


def start(hold: int = 10, node: str = "") -> Drill:
    return drills.drill_start(
        pool=Pool.objects.get(name="training"),
        kind=Drill.Kind.NODE_JOINS,
        node_name=node,
        hold_seconds=hold,
        user=user_in("pool-admins", "join-admin"),
        now=timezone.now(),
    )


def on_cluster(sim: Kubesim, name: str) -> dict[str, object] | None:
    try:
        node = sim.core().read_node(name)
    except ApiException as exc:
        assert exc.status == 404
        return None
    return {
        "labels": node.metadata.labels,
        "taints": node.spec.taints,
        "gpus": node.status.capacity,
    }


def test_a_new_node_is_recognised_as_unassigned_within_a_sync_then_removed(
    portal: Kubesim,
) -> None:
    drill = start()
    name = drill.node_name
    assert name == f"drill-new-node-{drill.pk}" and on_cluster(portal, name) is None
    drills.drill_begin(drill.pk, now=timezone.now())
    joined = on_cluster(portal, name)
    assert joined is not None and "gpu-pool" not in joined["labels"]  # type: ignore[operator]
    assert joined["gpus"]["nvidia.com/gpu"] == "8"  # type: ignore[index]  # like the pool's

    inventory_sync()  # the periodic sync that runs during the hold
    row = Node.objects.get(name=name)
    assert row.pool is None and row.gone_at is None
    recognised = next(
        c
        for c in pool_readiness(Pool.objects.get(name="training"), now=timezone.now())
        if c.name == "recognised"
    )
    assert name in recognised.detail

    done = drills.drill_finish(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.PASSED, done.checks
    assert {c["name"]: c["status"] for c in done.checks} == {
        "recognised": "pass",
        "removed": "pass",
    }
    assert on_cluster(portal, name) is None
    assert Node.objects.get(name=name).gone_at is not None
    inventory_sync()  # the next sync agrees: the node stays gone
    assert not Node.objects.present().filter(name=name).exists()
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["drill.started", "drill.node_added", "drill.finished"]


def test_a_node_the_inventory_never_saw_fails_the_drill_and_is_removed(portal: Kubesim) -> None:
    drill = start()
    drills.drill_begin(drill.pk, now=timezone.now())
    done = drills.drill_finish(drill.pk, now=timezone.now())  # no sync, no watcher meanwhile
    assert done is not None and done.state == Drill.State.FAILED
    recognised = next(c for c in done.checks if c["name"] == "recognised")
    assert recognised["status"] == "fail" and "was not seen" in recognised["detail"]
    assert on_cluster(portal, drill.node_name) is None


def test_the_new_node_drill_takes_no_node_and_lasts_a_sync(portal: Kubesim) -> None:
    with pytest.raises(InvalidInput) as bad:
        start(hold=5, node="a100-train-001")
    assert bad.value.fields == {
        "hold_seconds": "Hold 10 to 3600 seconds. A new node must be recognised within one "
        "inventory sync (INVENTORY_SYNC_SECONDS=10).",
        "node": "A new-node drill adds its own node: give no node.",
    }
    assert not Drill.objects.exists() and not AuditEvent.objects.exists()


def test_an_account_that_may_not_create_nodes_errors_the_drill_and_changes_nothing(
    portal: Kubesim,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.KUBE_CONTEXT = portal.readonly_context  # as the chart's role without newNodeDrills
    drill = start()
    done = drills.drill_begin(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.ERRORED
    assert "could not start the drill" in done.error and "403" in done.error
    assert on_cluster(portal, drill.node_name) is None
    assert done.finished_at is not None
    assert drills.drills_end_overdue(now=drill.ends_at + timedelta(seconds=1)) == []


@pytest.mark.django_db(transaction=True)
def test_a_drill_ends_and_is_audited_in_one_transaction(portal: Kubesim) -> None:
    """A reader that sees the drill ended sees its audit event: the state and the event are
    written in one transaction (a worker's test once read the state between the two)."""
    drill = start()
    drills.drill_begin(drill.pk, now=timezone.now())
    writes: list[tuple[str, bool]] = []

    def watch(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if sql.startswith(('UPDATE "pools_drill"', 'INSERT INTO "pools_auditevent"')):
            what = "drill state" if '"state"' in sql.split("WHERE")[0] else sql[:30]
            writes.append((what, context["connection"].in_atomic_block))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        done = drills.drill_finish(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.FAILED  # no sync meanwhile
    # The drill's end and its audit event, last, both inside one transaction.
    assert writes[-2:] == [("drill state", True), ('INSERT INTO "pools_auditevent"', True)], writes
