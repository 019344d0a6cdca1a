"""The drills over the API (/api/v1/drills/): pool admins start one, everyone with a role
reads them with their results; bad input names its field and starts nothing; the list costs
the same queries however many drills."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.inventory import inventory_sync
from pools.models import AuditEvent, Drill, Pool
from tests.api.conftest import api
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]
NODE = "a100-train-001"
DOWN = {"kind": "node_down", "pool": "training", "node": NODE}


@pytest.fixture
def synced(cluster: Kubesim, settings) -> Kubesim:  # type: ignore[no-untyped-def]
    settings.INVENTORY_SYNC_SECONDS = 10
    inventory_sync()
    return cluster


@pytest.mark.kubesim_only(
    "a GPU-fault drill injects its XID through kubesim's API server; a real one refuses it "
    "(test_a_gpu_fault_drill_is_refused_by_a_real_api_server)"
)
def test_a_pool_admin_starts_a_drill_and_anyone_reads_it(synced: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    body = {"kind": "gpu_fault", "pool": "training", "node": NODE, "hold_seconds": 60}
    started = api(token_for("pool-admins")).post("/api/v1/drills/", body, "application/json")
    assert started.status_code == 201, started.json()
    drill = started.json()
    assert {k: drill[k] for k in ("kind", "pool", "node", "state", "hold_seconds")} == {
        "kind": "gpu_fault",
        "pool": "training",
        "node": NODE,
        "state": "starting",
        "hold_seconds": 60,
    }
    assert drill["started_by"] == "api-pool-admins" and drill["checks"] == []
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_name, event.node_name) == (
        "drill.started",
        "api-pool-admins",
        NODE,
    )

    viewer = api(token_for("viewers"))
    listed = viewer.get("/api/v1/drills/").json()
    assert [d["id"] for d in listed["results"]] == [drill["id"]]
    assert viewer.get("/api/v1/drills/?pool=inference").json()["results"] == []
    one = viewer.get(f"/api/v1/drills/{drill['id']}/")
    assert one.status_code == 200 and one.json()["ends_at"] == drill["ends_at"]
    assert viewer.get("/api/v1/drills/999999/").status_code == 404


@pytest.mark.parametrize(
    "backend", [pytest.param("kubernetes", marks=pytest.mark.kubernetes)], indirect=True
)
def test_a_gpu_fault_drill_is_refused_by_a_real_api_server(synced: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    """A real API server has no fault endpoint: the drill is refused at once with why, and
    nothing is recorded (no drill left running to block the pool's other drills)."""
    body = {"kind": "gpu_fault", "pool": "training", "node": NODE, "hold_seconds": 60}
    refused = api(token_for("pool-admins")).post("/api/v1/drills/", body, "application/json")
    assert refused.status_code == 400
    assert "this cluster cannot inject GPU faults" in refused.content.decode()
    assert not Drill.objects.exists() and not AuditEvent.objects.exists()


def test_a_new_node_drill_gets_its_own_node(synced: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    body = {"kind": "node_joins", "pool": "training", "hold_seconds": 10}
    started = api(token_for("pool-admins")).post("/api/v1/drills/", body, "application/json")
    assert started.status_code == 201, started.json()
    assert started.json()["node"] == f"drill-new-node-{started.json()['id']}"


@pytest.mark.parametrize("role", ["viewers", "requesters", "approvers"])
def test_only_pool_admins_start_drills(synced: Kubesim, token_for, role: str) -> None:  # type: ignore[no-untyped-def]
    body = {"kind": "node_down", "pool": "training", "node": NODE, "hold_seconds": 30}
    refused = api(token_for(role)).post("/api/v1/drills/", body, "application/json")
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "Only pool admins run drills."
    assert not Drill.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({**DOWN, "kind": "unplug"}, "kind", "not a valid choice"),
        ({"pool": "training", "node": NODE}, "kind", "required"),
        ({**DOWN, "pool": "nope"}, "pool", "No active pool is named"),
        ({**DOWN, "node": "a100-infer-000"}, "node", "not a node"),
        ({"kind": "gpu_fault", "pool": "training"}, "node", "No node is not a node"),
        ({**DOWN, "hold_seconds": 5}, "hold_seconds", "Hold 10 to 3600"),
        ({**DOWN, "hold_seconds": 3601}, "hold_seconds", "3600"),
        ({**DOWN, "hold_seconds": "x"}, "hold_seconds", "Must be an integer"),
        ({**DOWN, "kind": "node_joins", "hold_seconds": 10}, "node", "give no node"),
    ],
)
def test_bad_input_names_the_field_and_starts_nothing(  # type: ignore[no-untyped-def]
    synced: Kubesim, token_for, body: dict[str, object], field: str, says: str
) -> None:
    refused = api(token_for("pool-admins")).post("/api/v1/drills/", body, "application/json")
    assert refused.status_code == 400, refused.json()
    error = refused.json()["error"]
    assert set(error["fields"]) == {field}
    assert says in str(error["fields"][field])
    assert not Drill.objects.exists() and not AuditEvent.objects.exists()


def test_one_drill_at_a_time_per_pool(synced: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    admin = api(token_for("pool-admins"))
    body = {"kind": "node_down", "pool": "training", "node": NODE, "hold_seconds": 30}
    assert admin.post("/api/v1/drills/", body, "application/json").status_code == 201
    busy = admin.post("/api/v1/drills/", {**body, "node": "a100-train-002"}, "application/json")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "drill_running"
    assert Drill.objects.count() == 1


def finished_drills(count: int) -> None:
    admin, now = user_in("pool-admins", "history-admin"), timezone.now()
    for pool in Pool.objects.active()[:count]:
        Drill.objects.create(
            pool=pool,
            node_name="n",
            state=Drill.State.PASSED,
            started_by=admin,
            ends_at=now + timedelta(minutes=2),
            checks=[{"name": "restored", "title": "t", "status": "pass", "detail": "d"}],
        )


def test_the_list_costs_the_same_queries_for_one_drill_or_many(token_for) -> None:  # type: ignore[no-untyped-def]
    client = api(token_for("viewers"))
    finished_drills(1)
    client.get("/api/v1/drills/")  # the token's last-used stamp is written once a minute
    with CaptureQueriesContext(connection) as one:
        assert len(client.get("/api/v1/drills/").json()["results"]) == 1
    finished_drills(3)
    with CaptureQueriesContext(connection) as many:
        assert len(client.get("/api/v1/drills/").json()["results"]) == 4
    assert len(one) == len(many)
