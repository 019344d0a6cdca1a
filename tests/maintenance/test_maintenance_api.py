"""Maintenances over the API and on the pages, without a cluster (the workflow writes only
the database; the worker's steps are tested against API servers in
tests/edges/maintenance/): who may start and steer one, every bad input refused naming its
field with nothing written, one maintenance a pool at a time, a stale confirmation refused,
and a node in maintenance kept out of moves."""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.common.errors import MoveRefused
from pools.maintenance import waves
from pools.models import AuditEvent, Maintenance, MaintenanceNode, Pool
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
URL = "/api/v1/maintenances/"
NODES = ["a100-reserve-000", "a100-reserve-001", "a100-reserve-002"]


@pytest.fixture
def demo(settings):  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = ""
    settings.KUBE_IN_CLUSTER = False
    demo_inventory()


def body(**changes: Any) -> dict[str, Any]:
    sent: dict[str, Any] = {
        "pool": "mixed",
        "nodes": NODES,
        "wave_size": 1,
        "hold": "confirm",
        "step": "driver upgraded",
        "reason": "driver 570",
    }
    sent.update(changes)
    return {k: v for k, v in sent.items() if v is not None}


def test_a_pool_admin_starts_a_maintenance_and_anyone_may_read_it(demo, token_for) -> None:  # type: ignore[no-untyped-def]
    answer = api(token_for("pool-admins")).post(URL, body(), content_type="application/json")
    assert answer.status_code == 201, answer.content
    found = answer.json()
    assert (found["pool"], found["state"], found["wave"]) == ("mixed", "running", 0)
    assert [n["node"] for n in found["nodes"]] == NODES
    assert {n["state"] for n in found["nodes"]} == {"waiting"}
    started = AuditEvent.objects.get(action="maintenance.started")
    assert started.maintenance_id == found["id"] and started.actor_name == "api-pool-admins"

    viewer = api(token_for("viewers"))
    assert viewer.get(f"{URL}{found['id']}/").json()["reason"] == "driver 570"
    assert [m["id"] for m in viewer.get(f"{URL}?pool=mixed&state=running").json()["results"]] == [
        found["id"]
    ]
    assert viewer.get(f"{URL}?state=sleeping").status_code == 400
    (event,) = viewer.get(f"/api/v1/audit-events/?maintenance={found['id']}").json()["results"]
    assert (event["action"], event["maintenance"]) == ("maintenance.started", found["id"])


@pytest.mark.parametrize("role", ["viewers", "requesters", "approvers"])
def test_only_pool_admins_start_or_steer_one(demo, token_for, role: str) -> None:  # type: ignore[no-untyped-def]
    answer = api(token_for(role)).post(URL, body(), content_type="application/json")
    assert answer.status_code == 403
    assert Maintenance.objects.count() == 0
    maintenance = waves.maintenance_start(
        pool=Pool.objects.get(name="mixed"),
        user=user_in("pool-admins", "paula"),
        reason="firmware",
        wave_size=1,
        step="done",
        nodes=NODES,
    )
    for step in ("pause", "resume", "cancel", "confirm"):
        answer = api(token_for(role)).post(f"{URL}{maintenance.pk}/{step}/", {"wave": 1})
        assert answer.status_code == 403, step
    assert Maintenance.objects.get().state == "running"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"wave_size": 0}, "wave_size"),
        ({"wave_size": "2"}, "wave_size"),
        ({"wave_size": 150, "wave_percent": True}, "wave_size"),
        ({"hold": "label", "hold_label": "not a label!"}, "hold_label"),
        ({"hold": "label", "hold_label": ""}, "hold_label"),
        ({"hold": "whenever"}, "hold"),
        ({"step": ""}, "step"),
        ({"nodes": ["a100-train-000"]}, "nodes"),
        ({"nodes": None, "count": 99}, "count"),
        ({"nodes": None, "count": 0}, "count"),
        ({"drain_deadline_seconds": 5}, "drain_deadline_seconds"),
        ({"drain_deadline_seconds": "600"}, "drain_deadline_seconds"),
        ({"reason": ""}, "reason"),
        ({"reason": "   "}, "reason"),
        ({"pool": "no-such-pool"}, "pool"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_written(
    demo, token_for, changes: dict[str, Any], field: str
) -> None:  # type: ignore[no-untyped-def]
    answer = api(token_for("pool-admins")).post(
        URL, body(**changes), content_type="application/json"
    )
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"], answer.json()
    assert Maintenance.objects.count() == MaintenanceNode.objects.count() == 0
    assert not AuditEvent.objects.filter(action__startswith="maintenance.").exists()


def test_malformed_json_is_a_400(demo, token_for) -> None:  # type: ignore[no-untyped-def]
    answer = api(token_for("pool-admins")).post(URL, "{", content_type="application/json")
    assert answer.status_code == 400
    assert Maintenance.objects.count() == 0


def test_one_maintenance_a_pool_at_a_time_and_its_nodes_stay_out_of_moves(demo, token_for) -> None:  # type: ignore[no-untyped-def]
    admin = api(token_for("pool-admins"))
    first = admin.post(URL, body(), content_type="application/json").json()
    again = admin.post(URL, body(nodes=["a100-reserve-003"]), content_type="application/json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "maintenance_running"
    assert Maintenance.objects.count() == 1

    with pytest.raises(MoveRefused) as refused:
        moves.move_request_create(
            requested_by=user_in("requesters", "rita"),
            node_names=[NODES[0]],
            destination=Pool.objects.get(name="training"),
            reason="rebalance",
            now=timezone.now(),
        )
    assert refused.value.code == "in_maintenance"
    assert f"in maintenance #{first['id']}" in refused.value.message

    # Once it is over the node may move again, and the pool may have another maintenance.
    Maintenance.objects.filter(pk=first["id"]).update(state="done")
    assert admin.post(URL, body(), content_type="application/json").status_code == 201


def test_a_node_held_by_a_move_is_refused(demo, token_for) -> None:  # type: ignore[no-untyped-def]
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=[NODES[1]],
        destination=Pool.objects.get(name="training"),
        reason="rebalance",
        now=timezone.now(),
    )
    answer = api(token_for("pool-admins")).post(URL, body(), content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"]["nodes"] == (
        f"{NODES[1]} already has an active move (#{move.pk})."
    )


def test_steering_a_maintenance(demo, token_for) -> None:  # type: ignore[no-untyped-def]
    admin = api(token_for("pool-admins"))
    pk = admin.post(URL, body(), content_type="application/json").json()["id"]
    stale = admin.post(f"{URL}{pk}/confirm/", {"wave": 1}, content_type="application/json")
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_wave"
    assert (
        admin.post(
            f"{URL}{pk}/confirm/", {"wave": "1"}, content_type="application/json"
        ).status_code
        == 400
    )

    # A wave drained (as the worker records it): its confirmation is taken once.
    Maintenance.objects.filter(pk=pk).update(wave=1)
    MaintenanceNode.objects.filter(maintenance_id=pk, node__name=NODES[0]).update(
        wave=1, state="held"
    )
    confirmed = admin.post(f"{URL}{pk}/confirm/", {"wave": 1}, content_type="application/json")
    assert confirmed.status_code == 200 and confirmed.json()["confirmed_wave"] == 1
    wrong = admin.post(f"{URL}{pk}/confirm/", {"wave": 2}, content_type="application/json")
    assert wrong.status_code == 409

    assert admin.post(f"{URL}{pk}/resume/").json()["error"]["code"] == "not_paused"
    paused = admin.post(
        f"{URL}{pk}/pause/", {"reason": "vendor call"}, content_type="application/json"
    )
    assert (paused.json()["state"], paused.json()["paused_reason"]) == ("paused", "vendor call")
    assert admin.post(f"{URL}{pk}/pause/", {}, "application/json").json()["error"]["code"] == (
        "already_paused"
    )
    assert admin.post(f"{URL}{pk}/resume/").json()["state"] == "running"
    cancelled = admin.post(f"{URL}{pk}/cancel/").json()
    assert cancelled["cancel_requested"] is True and cancelled["state"] == "running"
    actions = list(
        AuditEvent.objects.filter(maintenance_id=pk).order_by("id").values_list("action", flat=True)
    )
    assert actions == [
        "maintenance.started",
        "maintenance.confirmed",
        "maintenance.paused",
        "maintenance.resumed",
        "maintenance.cancel_requested",
    ]
    Maintenance.objects.filter(pk=pk).update(state="cancelled")
    assert admin.post(f"{URL}{pk}/pause/", {}, "application/json").json()["error"]["code"] == (
        "maintenance_ended"
    )
    assert admin.post(f"{URL}999/pause/").status_code == 404


def test_the_pages(demo) -> None:  # type: ignore[no-untyped-def]
    paula = Client()
    paula.force_login(user_in("pool-admins", "paula"))
    form = paula.get("/pools/mixed/maintenance/new/").content.decode()
    assert "Headroom now" in form and 'value="a100-reserve-000"' in form
    refused = paula.post(
        "/pools/mixed/maintenance/new/",
        {
            "nodes": NODES,
            "wave_size": 1,
            "hold": "label",
            "hold_label": "bad label!",
            "drain_deadline_minutes": 30,
            "reason": "firmware",
        },
    )
    assert refused.status_code == 200
    assert "The hold label: the key &#x27;bad label!&#x27;" in refused.content.decode()
    assert Maintenance.objects.count() == 0
    started = paula.post(
        "/pools/mixed/maintenance/new/",
        {
            "nodes": NODES,
            "wave_size": 1,
            "hold": "confirm",
            "step": "driver upgraded",
            "drain_deadline_minutes": 30,
            "reason": "firmware",
        },
    )
    found = Maintenance.objects.get()
    assert started.status_code == 302 and started["Location"] == f"/maintenance/{found.pk}/"
    detail = unescape(paula.get(started["Location"]).content.decode())
    assert 'data-action="pause"' in detail and 'data-action="cancel"' in detail
    assert "maintenance.started" in detail
    assert paula.post(f"/maintenance/{found.pk}/pause/").status_code == 302
    assert Maintenance.objects.get().state == "paused"

    vera = Client()
    vera.force_login(user_in("viewers", "vera"))
    assert vera.get("/pools/mixed/maintenance/new/").status_code == 403
    assert vera.post(f"/maintenance/{found.pk}/resume/").status_code == 403
    seen = vera.get(f"/maintenance/{found.pk}/").content.decode()
    assert 'data-action="resume"' not in seen and "paused by paula" in seen
    listed = vera.get("/maintenance/").content.decode()
    assert f'data-maintenance="{found.pk}"' in listed
    assert Client().get("/maintenance/").status_code == 302  # login first
