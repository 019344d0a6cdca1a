"""The API's contract: tokens, the error shape, idempotency keys, throttling, paging."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from pools.models import ApiToken, MoveRequest, Node, Pool
from pools.tokens import token_create, token_revoke
from tests.api.conftest import api
from tests.factories import demo_inventory

JSON = "application/json"


def post(client: Client, path: str, body: object, **headers: str):  # type: ignore[no-untyped-def]
    return client.post(path, json.dumps(body), content_type=JSON, **headers)


def error_of(response) -> dict:  # type: ignore[no-untyped-def,type-arg]
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}, body
    return body["error"]


@pytest.mark.django_db
def test_tokens_are_stored_hashed_and_revocable(token_for: Callable[[str], str]) -> None:
    raw = token_for("viewers")
    stored = ApiToken.objects.get()
    assert raw.startswith("gpp_") and raw not in (stored.key_hash, stored.hint)
    assert api(raw).get("/api/v1/pools/").status_code == 200
    token_revoke(user=stored.user, token_id=stored.pk)
    response = api(raw).get("/api/v1/pools/")
    assert response.status_code == 401
    assert error_of(response) == {
        "code": "authentication_failed",
        "message": "This API token was revoked.",
        "fields": {},
    }
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
def test_no_credentials_and_unknown_tokens_are_401_in_the_error_shape(db) -> None:  # type: ignore[no-untyped-def]
    assert error_of(api().get("/api/v1/nodes/"))["code"] == "not_authenticated"
    assert error_of(api("gpp_nope").get("/api/v1/nodes/"))["message"] == "Unknown API token."
    assert api().get("/api/schema/").status_code == 401


@pytest.mark.django_db
def test_validation_errors_name_the_fields(token_for: Callable[[str], str]) -> None:
    client = api(token_for("requesters"))
    response = post(client, "/api/v1/moves/", {"nodes": [], "destination": "nowhere"})
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "validation"
    assert set(error["fields"]) == {"nodes", "destination", "reason"}
    assert "Object with name=nowhere does not exist." in error["fields"]["destination"]


@pytest.mark.django_db
def test_malformed_json_and_wrong_media_type(token_for: Callable[[str], str]) -> None:
    client = api(token_for("requesters"))
    bad = client.post("/api/v1/moves/", "{nodes: [", content_type=JSON)
    assert bad.status_code == 400 and error_of(bad)["code"] == "malformed_request"
    form = client.post("/api/v1/moves/", {"nodes": "x"})
    assert form.status_code == 415 and error_of(form)["code"] == "unsupported_media_type"


@pytest.mark.django_db
def test_unknown_endpoints_are_json_404s(token_for: Callable[[str], str]) -> None:
    response = api(token_for("viewers")).get("/api/v1/nothing-here/")
    assert response.status_code == 404
    assert error_of(response)["message"] == "No API endpoint at /api/v1/nothing-here/."
    missing = api(token_for("viewers", "v2")).get("/api/v1/nodes/nope/")
    assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"


@pytest.mark.django_db
def test_state_conflicts_are_409_with_a_stable_code(token_for: Callable[[str], str]) -> None:
    demo_inventory()
    requester = api(token_for("requesters"))
    approver = api(token_for("approvers"))
    created = post(
        requester,
        "/api/v1/moves/",
        {"nodes": ["gpu-new-000"], "destination": "mixed", "reason": "try"},
    )
    assert created.status_code == 201, created.json()
    move_id = created.json()["id"]
    rejected = post(approver, f"/api/v1/moves/{move_id}/reject/", {"reason": "no"})
    assert rejected.json()["state"] == "rejected"
    again = post(approver, f"/api/v1/moves/{move_id}/approve/", {})
    assert again.status_code == 409
    assert error_of(again)["code"] == "state_conflict"
    floor = post(
        requester,
        "/api/v1/moves/",
        {
            "nodes": ["a100-train-000", "a100-train-001", "a100-train-002", "a100-train-003"],
            "destination": "mixed",
            "reason": "drain training",
        },
    )
    assert floor.status_code == 409
    error = error_of(floor)
    assert error["code"] == "capacity_floor"
    assert error["fields"]["checks"][0]["code"] == "capacity_floor"
    own = post(
        requester,
        "/api/v1/moves/",
        {"nodes": ["gpu-new-000"], "destination": "mixed", "reason": "again"},
    )
    self_approval = post(requester, f"/api/v1/moves/{own.json()['id']}/approve/", {})
    assert self_approval.status_code == 403  # requesters may not approve at all


@pytest.mark.django_db
def test_idempotency_key_returns_the_first_answer(token_for: Callable[[str], str]) -> None:
    demo_inventory()
    client = api(token_for("requesters"))
    body = {"nodes": ["gpu-new-000"], "destination": "mixed", "reason": "once"}
    first = post(client, "/api/v1/moves/", body, HTTP_IDEMPOTENCY_KEY="k-1")
    second = post(client, "/api/v1/moves/", body, HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert second["Idempotent-Replayed"] == "true"
    assert MoveRequest.objects.count() == 1
    other = post(client, "/api/v1/moves/", {**body, "reason": "twice"}, HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422 and error_of(other)["code"] == "idempotency_key_reused"
    approver = api(token_for("approvers"))
    move_id = first.json()["id"]
    ok = post(approver, f"/api/v1/moves/{move_id}/approve/", {}, HTTP_IDEMPOTENCY_KEY="a-1")
    replay = post(approver, f"/api/v1/moves/{move_id}/approve/", {}, HTTP_IDEMPOTENCY_KEY="a-1")
    assert ok.status_code == replay.status_code == 200
    assert MoveRequest.objects.get().approvals.count() == 1
    # A refusal is an answer too: replayed, not re-evaluated.
    refused = post(client, "/api/v1/moves/", body, HTTP_IDEMPOTENCY_KEY="k-2")
    assert refused.status_code == 409
    assert post(client, "/api/v1/moves/", body, HTTP_IDEMPOTENCY_KEY="k-2").json() == refused.json()


@pytest.mark.django_db
def test_token_clients_are_throttled(token_for: Callable[[str], str], settings) -> None:  # type: ignore[no-untyped-def]
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "3/min"},
    }
    client = api(token_for("viewers"))
    codes = [client.get("/api/v1/pools/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    throttled = client.get("/api/v1/pools/")
    assert error_of(throttled)["code"] == "throttled" and "Retry-After" in throttled
    session = Client()
    session.force_login(User.objects.get(username="api-viewers"))
    assert all(session.get("/api/v1/pools/").status_code == 200 for _ in range(5))


def make_nodes(count: int) -> None:
    pools = list(Pool.objects.all())
    Node.objects.bulk_create(
        [
            Node(
                name=f"node-{i:04d}",
                pool=pools[i % len(pools)],
                pool_label=pools[i % len(pools)].name,
                gpu_model="NVIDIA-A100-SXM4-80GB",
                gpu_count=8,
                gpu_allocatable=8,
                gpu_allocated=i % 9,
                ready=i % 7 != 0,
                cordoned=i % 11 == 0,
                labels={},
                taints=[],
                pods=[],
                last_seen=timezone.now(),
            )
            for i in range(count)
        ],
        batch_size=200,
    )


@pytest.mark.django_db
def test_node_list_filters_search_ordering_and_cursor_paging(
    token_for: Callable[[str], str],
) -> None:
    make_nodes(30)
    client = api(token_for("viewers"))
    page = client.get("/api/v1/nodes/?page_size=10").json()
    assert [n["name"] for n in page["results"]] == [f"node-{i:04d}" for i in range(10)]
    second = client.get(page["next"]).json()
    assert second["results"][0]["name"] == "node-0010"
    training = client.get("/api/v1/nodes/?pool=training&page_size=100").json()["results"]
    assert training and all(n["pool"] == "training" for n in training)
    assert all(not n["ready"] for n in client.get("/api/v1/nodes/?ready=false").json()["results"])
    assert [n["name"] for n in client.get("/api/v1/nodes/?search=node-002").json()["results"]] == [
        f"node-002{i}" for i in range(10)
    ]
    newest = client.get("/api/v1/nodes/?ordering=-name&page_size=1").json()["results"]
    assert newest[0]["name"] == "node-0029"
    assert client.get("/api/v1/nodes/?ready=maybe").status_code == 400


@pytest.mark.django_db
def test_the_schema_and_its_docs_are_served_without_a_cdn(token_for: Callable[[str], str]) -> None:
    schema = api(token_for("viewers")).get("/api/schema/?format=json")
    assert schema.status_code == 200
    document = schema.json()
    assert document["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"
    assert "/api/v1/moves/{id}/approve/" in document["paths"]
    assert "409" in document["paths"]["/api/v1/moves/"]["post"]["responses"]
    session = Client()
    session.force_login(User.objects.get(username="api-viewers"))
    docs = session.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs
    assert "cdn" not in docs.lower()
    assert Client().get("/api/docs/").status_code == 302  # people log in first


@pytest.mark.django_db
def test_the_pages_token_ui_shows_a_secret_once(db) -> None:  # type: ignore[no-untyped-def]
    from tests.moves_helpers import user_in

    client = Client()
    client.force_login(user_in("viewers", "vera"))
    html = client.post("/tokens/", {"name": "ci"}, follow=True).content.decode()
    secret = html.split('id="token-secret">')[1].split("<")[0]
    assert secret.startswith("gpp_")
    assert secret not in client.get("/tokens/").content.decode()
    token = ApiToken.objects.get()
    assert api(secret).get("/api/v1/pools/").status_code == 200
    client.post(f"/tokens/{token.pk}/revoke/")
    assert api(secret).get("/api/v1/pools/").status_code == 401
    other = token_create(user=user_in("viewers", "other"), name="x")[0]
    client.post(f"/tokens/{other.pk}/revoke/")
    other.refresh_from_db()
    assert other.revoked_at is None  # only one's own tokens


@pytest.mark.django_db
def test_the_fast_node_row_equals_the_declared_serializer(token_for: Callable[[str], str]) -> None:
    from rest_framework import serializers as drf

    from pools.api.fleet import NodeSerializer

    make_nodes(3)
    node = Node.objects.select_related("pool").get(name="node-0001")

    class Declared(NodeSerializer):
        """The same fields, through the generic path DRF would take."""

    from pools.api.fleet import NODE_ROW_FIELDS

    generic = dict(Declared(node).data)
    assert dict(NodeSerializer(node).data) == generic
    row = Node.objects.filter(name="node-0001").values(*NODE_ROW_FIELDS).get()
    assert dict(NodeSerializer(row).data) == generic  # the list's plain-row path
    assert isinstance(NodeSerializer().fields["metrics"], drf.SerializerMethodField)


@pytest.mark.django_db
def test_idempotency_answers_are_forgotten_after_a_day(token_for: Callable[[str], str]) -> None:
    from datetime import timedelta

    from pools.common.idempotency import idempotency_records_purge
    from pools.models import IdempotencyRecord

    client = api(token_for("requesters"))
    post(client, "/api/v1/moves/dry-run/", {"nodes": ["x"], "destination": "mixed"})
    post(
        client, "/api/v1/moves/", {"nodes": [], "destination": "mixed"}, HTTP_IDEMPOTENCY_KEY="old"
    )
    assert IdempotencyRecord.objects.count() == 1
    now = timezone.now()
    assert idempotency_records_purge(now=now + timedelta(hours=23)) == 0
    assert idempotency_records_purge(now=now + timedelta(hours=25)) == 1


@pytest.mark.django_db
def test_out_of_range_ids_are_a_400_not_a_500(token_for: Callable[[str], str]) -> None:
    client = api(token_for("viewers"))
    for bad in ("-2.4088758172630497e+269", "1.5", "0", "99999999999999999999999"):
        response = client.get(f"/api/v1/audit-events/?request={bad}")
        assert response.status_code == 400, bad
        assert "request" in error_of(response)["fields"]
    assert client.get("/api/v1/moves/99999999999999999999999/").status_code == 404


@pytest.mark.django_db
def test_a_pool_cannot_be_renamed(token_for: Callable[[str], str]) -> None:
    client = api(token_for("pool-admins"))
    response = client.patch(
        "/api/v1/pools/shared/", json.dumps({"name": "renamed", "min_nodes": 1}), content_type=JSON
    )
    assert response.status_code == 200 and response.json()["name"] == "shared"
    assert Pool.objects.get(name="shared").min_nodes == 1
    assert not Pool.objects.filter(name="renamed").exists()


@pytest.mark.django_db
def test_decisions_take_reason_and_still_read_the_deprecated_comment(
    token_for: Callable[[str], str],
) -> None:
    demo_inventory()
    requester = api(token_for("requesters"))
    approver = api(token_for("approvers"))

    def ask(node: str, destination: str = "mixed") -> int:
        body = {"nodes": [node], "destination": destination, "reason": "try"}
        created = post(requester, "/api/v1/moves/", body)
        assert created.status_code == 201, created.json()
        return int(created.json()["id"])

    first = ask("gpu-new-000")
    missing = post(approver, f"/api/v1/moves/{first}/reject/", {})
    assert missing.status_code == 400
    assert set(error_of(missing)["fields"]) == {"reason"}  # the field it asks for is reason
    rejected = post(approver, f"/api/v1/moves/{first}/reject/", {"reason": "not now"})
    assert rejected.json()["state"] == "rejected"
    assert MoveRequest.objects.get(pk=first).events.get(action="move.rejected").message == (
        "not now"
    )
    second = ask("gpu-new-001")
    legacy = post(approver, f"/api/v1/moves/{second}/reject/", {"comment": "old clients"})
    assert legacy.json()["state"] == "rejected"
    third = ask("a100-reserve-000", "training")
    approved = post(approver, f"/api/v1/moves/{third}/approve/", {"reason": "fine by me"})
    assert approved.json()["approvals"][0]["reason"] == "fine by me"


@pytest.mark.django_db
def test_a_retired_pool_is_listed_apart_restored_and_names_itself_when_its_name_is_asked(
    token_for: Callable[[str], str],
) -> None:
    admin = api(token_for("pool-admins"))
    assert admin.delete("/api/v1/pools/shared/").status_code == 204
    assert "shared" not in [p["name"] for p in admin.get("/api/v1/pools/").json()]
    retired = admin.get("/api/v1/pools/?retired=true").json()
    assert [p["name"] for p in retired] == ["shared"] and retired[0]["retired_at"]
    taken = post(admin, "/api/v1/pools/", {"name": "shared", "display_name": "Again"})
    assert taken.status_code == 400
    assert "taken by the retired pool 'Shared" in error_of(taken)["fields"]["name"][0]
    restored = post(admin, "/api/v1/pools/shared/restore/", None)
    assert restored.status_code == 200 and restored.json()["retired_at"] is None
    assert "shared" in [p["name"] for p in admin.get("/api/v1/pools/").json()]
    assert post(admin, "/api/v1/pools/shared/restore/", None).status_code == 404  # not retired


@pytest.mark.django_db
def test_a_pools_accepted_gpu_layouts_are_checked_and_kept(token_for: Callable[[str], str]) -> None:
    client = api(token_for("pool-admins"))
    bad = client.patch(
        "/api/v1/pools/shared/",
        json.dumps({"accepted_gpu_layouts": ["whole", "mig-9g.1gb"]}),
        content_type=JSON,
    )
    assert bad.status_code == 400
    [message] = error_of(bad)["fields"]["accepted_gpu_layouts"]
    assert "'mig-9g.1gb' must be whole, shared, dra, or mig-<profile>" in message
    assert Pool.objects.get(name="shared").accepted_gpu_layouts == []
    good = client.patch(
        "/api/v1/pools/shared/",
        json.dumps({"accepted_gpu_layouts": ["whole", "mig-1g.10gb"]}),
        content_type=JSON,
    )
    assert good.status_code == 200
    assert good.json()["accepted_gpu_layouts"] == ["whole", "mig-1g.10gb"]
