"""One FilterSet per list: a page and the API answer the same query with the same rows."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from pools.models import AuditEvent, MoveRequest, Pool
from pools.moves import move_reject, move_request_create
from pools.tokens import token_create
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer


@pytest.fixture
def moves(db) -> dict[str, MoveRequest]:  # type: ignore[no-untyped-def]
    demo_inventory()
    rita, ravi = user_in("requesters", "rita"), user_in("requesters", "ravi")
    made = {}
    for key, node, user in (
        ("rita-1", "a100-reserve-000", rita),
        ("rita-2", "a100-reserve-001", rita),
        ("ravi-1", "a100-reserve-002", ravi),
    ):
        made[key] = move_request_create(
            requested_by=user,
            node_names=[node],
            destination=Pool.objects.get(name="shared"),
            reason=key,
            now=timezone.now(),
        )
    move_reject(
        request=made["rita-2"], approver=user_in("approvers"), reason="no", now=timezone.now()
    )
    return made


def page_rows(client: Client, path: str, attribute: str) -> set[str]:
    return set(re.findall(rf'{attribute}="([^"]+)"', client.get(path).content.decode()))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=pending", {"rita-1", "ravi-1"}),
        ("state=active", {"rita-1", "ravi-1"}),
        ("state=rejected", {"rita-2"}),
        ("state=pending&mine=true", {"rita-1"}),
        ("state=rejected&node=a100-reserve-001", {"rita-2"}),
        ("state=pending&node=a100-reserve-001", set()),
    ],
)
def test_the_move_list_and_the_api_filter_alike(
    moves: dict[str, MoveRequest], query: str, expected: set[str]
) -> None:
    ids = {str(m.pk): key for key, m in moves.items()}
    page = Client()
    page.force_login(user_in("requesters", "rita"))
    shown = {ids[pk] for pk in page_rows(page, f"/moves/?{query}", "data-move")}
    token = token_create(user=user_in("requesters", "rita"), name="t")[1]
    answered = {
        ids[str(m["id"])] for m in api(token).get(f"/api/v1/moves/?{query}").json()["results"]
    }
    assert shown == answered == expected


@pytest.mark.django_db
def test_the_move_list_shows_every_state_under_all(moves: dict[str, MoveRequest]) -> None:
    page = Client()
    page.force_login(user_in("viewers"))
    assert len(page_rows(page, "/moves/?state=all", "data-move")) == 3
    assert len(page_rows(page, "/moves/", "data-move")) == 2  # pending by default


@pytest.mark.django_db
def test_the_audit_log_and_the_api_filter_alike(moves: dict[str, MoveRequest]) -> None:
    page = Client()
    page.force_login(user_in("viewers"))
    token = token_create(user=user_in("viewers"), name="t")[1]
    later = timezone.now().isoformat()
    AuditEvent.objects.create(action="pool.note", actor_name="system", message="later")
    for query, expected in (
        ("action=move.rejected", {"move.rejected"}),
        ("actor=rita", {"move.requested"}),
        (f"since={later}", {"pool.note"}),
        ("request=not-a-number", None),  # a 400 on both: never a list that looks filtered
    ):
        shown = page_rows(page, "/audit/?" + query.replace("+", "%2B"), "data-event")
        response = api(token).get("/api/v1/audit-events/?" + query.replace("+", "%2B"))
        if expected is None:
            assert response.status_code == 400 and shown == set()
            assert page.get("/audit/?" + query).status_code == 400
            continue
        assert shown == {e["action"] for e in response.json()["results"]} == expected, query


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("ready=false", {"a100-reserve-down-000"}),
        ("drifted=true", set()),
        ("gpu_model=NVIDIA-A100-SXM4-80GB&ready=true", {f"a100-reserve-00{i}" for i in range(9)}),
        ("health=no-metrics&ready=false", {"a100-reserve-down-000"}),
    ],
)
def test_the_pool_page_and_the_api_filter_nodes_alike(
    db,  # type: ignore[no-untyped-def]
    settings,
    prometheus: PrometheusServer,
    query: str,
    expected: set[str],
) -> None:
    # Prometheus answers, with no DCGM series: every node is "no-metrics".
    settings.PROMETHEUS_URL = prometheus.url
    demo_inventory()
    page = Client()
    page.force_login(user_in("viewers"))
    shown = page_rows(page, f"/pools/mixed/?{query}", "data-node")
    token = token_create(user=user_in("viewers"), name="t")[1]
    answered = api(token).get(f"/api/v1/nodes/?pool=mixed&page_size=100&{query}").json()
    assert shown == {n["name"] for n in answered["results"]} == expected
