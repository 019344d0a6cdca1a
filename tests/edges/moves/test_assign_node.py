"""`manage.py assign_node`: break-glass, one node into a pool now, with the workflow's PATCH."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from pools import moves
from pools.inventory import inventory_sync
from pools.models import AuditEvent, Node, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

# The cluster is kubesim's API server, then the real control plane.
pytestmark = pytest.mark.both_backends


def node_patches(sim: Kubesim, name: str) -> int:
    return sum(
        1
        for e in sim.audit_events()
        if e["verb"] == "patch" and e.get("objectRef", {}).get("name") == name
    )


def run(*args: str) -> str:
    out = StringIO()
    call_command("assign_node", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def portal(db, cluster: Kubesim) -> Kubesim:  # type: ignore[no-untyped-def]
    inventory_sync()
    user_in("pool-admins", "pat")
    return cluster


def test_dry_run_prints_the_diff_and_sends_nothing(portal: Kubesim) -> None:
    out = run("a100-reserve-000", "training", "--user", "pat", "--dry-run")
    assert out.startswith("a100-reserve-000 → training: would change +batch-scheduling=enabled")
    assert "~gpu-pool=training (was mixed)" in out
    assert "+taint workload-training=true:NoSchedule" in out
    assert node_patches(portal, "a100-reserve-000") == 0
    assert not AuditEvent.objects.exists()


def test_assign_patches_once_refreshes_and_records_break_glass(portal: Kubesim) -> None:
    out = run("a100-reserve-000", "training", "--user", "pat")
    assert ": changed +batch-scheduling=enabled, ~gpu-pool=training (was mixed)" in out
    node = portal.core().read_node("a100-reserve-000")
    assert node.metadata.labels["gpu-pool"] == "training"
    assert [t.key for t in node.spec.taints] == ["workload-training"]
    assert node_patches(portal, "a100-reserve-000") == 1
    assert Node.objects.get(name="a100-reserve-000").pool.name == "training"
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_name) == ("node.break_glass", "pat")
    assert event.message.startswith("break-glass: put in pool training outside the move workflow")
    assert event.before["labels"]["gpu-pool"] == "mixed"
    assert event.after["labels"]["gpu-pool"] == "training"
    # Again: already there, no PATCH.
    assert "nothing to change" in run("a100-reserve-000", "training", "--user", "pat")
    assert node_patches(portal, "a100-reserve-000") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("no-such-node", "training", "--user", "pat"), "No node 'no-such-node' in the cluster."),
        (("a100-reserve-000", "nowhere", "--user", "pat"), "No pool 'nowhere'; the pools are: "),
        (("a100-reserve-000", "training", "--user", "vic"), "vic is not a pool admin"),
        (("a100-reserve-000", "training", "--user", "ghost"), "No active user 'ghost'."),
    ],
)
def test_refusals_are_one_clear_line(portal: Kubesim, args: tuple[str, ...], message: str) -> None:
    user_in("viewers", "vic")
    with pytest.raises(CommandError) as refused:
        run(*args)
    assert str(refused.value).startswith(message)
    assert node_patches(portal, "a100-reserve-000") == 0


def test_a_node_held_by_a_move_is_left_to_the_move(portal: Kubesim) -> None:
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-001"],
        destination=Pool.objects.get(name="training"),
        reason="more training",
        now=timezone.now(),
    )
    with pytest.raises(CommandError, match=f"Move #{move.pk} holds a100-reserve-001"):
        run("a100-reserve-001", "inference", "--user", "pat")
