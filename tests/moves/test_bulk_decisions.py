"""Deciding several moves in one step: the list page and the API, four eyes per move."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.models import MoveRequest, Node, Pool
from pools.moves import move_reject, move_request_create
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in


def ask(user: User, node: str) -> MoveRequest:
    return move_request_create(
        requested_by=user,
        node_names=[node],
        destination=Pool.objects.get(name="training"),
        reason="more training capacity",
        drain_policy="leave-running",
        drain_deadline_seconds=1800,
        loan_until=None,
        health_override="",
        reconcile=False,
        now=timezone.now(),
    )


@pytest.fixture
def inventory(db) -> dict[str, Node]:  # type: ignore[no-untyped-def]
    return demo_inventory()


def states(*moves: MoveRequest) -> list[str]:
    return [MoveRequest.objects.get(pk=m.pk).state for m in moves]


@pytest.mark.django_db
def test_the_list_page_approves_the_ticked_moves_and_refuses_ones_own(
    inventory: dict[str, Node],
) -> None:
    rita, pat = user_in("requesters", "rita"), user_in("pool-admins", "pat")
    first, second = ask(rita, "a100-reserve-000"), ask(rita, "a100-reserve-001")
    own, untouched = ask(pat, "a100-reserve-002"), ask(rita, "a100-reserve-003")
    client = Client()
    client.force_login(pat)
    listed = client.get("/moves/").content.decode()
    assert f'name="move" value="{first.pk}" form="bulk-form"' in listed
    assert 'data-select-all="move"' in listed
    response = client.post(
        "/moves/bulk/",
        {"move": [first.pk, second.pk, own.pk], "action": "approve"},
        follow=True,
    )
    text = response.content.decode()
    assert f"Approval recorded: #{first.pk}, #{second.pk}." in text
    assert f"Move #{own.pk}: Four eyes: you cannot approve your own request." in text
    assert states(first, second, own, untouched) == ["approved", "approved", "pending", "pending"]


@pytest.mark.django_db
def test_a_bulk_reject_needs_one_reason_and_writes_nothing_without_it(
    inventory: dict[str, Node],
) -> None:
    rita = user_in("requesters", "rita")
    first, second = ask(rita, "a100-reserve-000"), ask(rita, "a100-reserve-001")
    client = Client()
    client.force_login(user_in("approvers", "arno"))
    refused = client.post(
        "/moves/bulk/", {"move": [first.pk, second.pk], "action": "reject"}, follow=True
    )
    assert "Say why the moves are rejected." in refused.content.decode()
    assert states(first, second) == ["pending", "pending"]
    client.post(
        "/moves/bulk/",
        {"move": [first.pk, second.pk], "action": "reject", "reason": "not this week"},
    )
    assert states(first, second) == ["rejected", "rejected"]
    assert MoveRequest.objects.get(pk=second.pk).events.filter(message="not this week").exists()


@pytest.mark.django_db
def test_requesters_cannot_decide_in_bulk_nor_see_the_boxes(inventory: dict[str, Node]) -> None:
    move = ask(user_in("requesters", "rita"), "a100-reserve-000")
    client = Client()
    client.force_login(user_in("requesters", "rob"))
    assert 'form="bulk-form"' not in client.get("/moves/").content.decode()
    assert client.post("/moves/bulk/", {"move": [move.pk], "action": "approve"}).status_code == 403
    assert states(move) == ["pending"]


def post(client: Client, url: str, body: object) -> object:
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_the_api_answers_per_id(
    inventory: dict[str, Node],
    token_for: Callable[..., str],
) -> None:
    rita = user_in("requesters", "rita")
    first, second = ask(rita, "a100-reserve-000"), ask(rita, "a100-reserve-001")
    admin_token = token_for("pool-admins", "pat")
    own = ask(User.objects.get(username="pat"), "a100-reserve-002")
    done = ask(rita, "a100-reserve-003")
    move_reject(
        request=done, approver=user_in("approvers", "arno"), reason="no", now=timezone.now()
    )
    ids = [first.pk, own.pk, 999999, second.pk, done.pk]
    response = post(api(admin_token), "/api/v1/moves/bulk-approve/", {"ids": ids})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["decided"], body["refused"]) == (2, 3)
    assert [(r["id"], r["ok"], r["code"]) for r in body["results"]] == [
        (first.pk, True, "ok"),
        (own.pk, False, "self_approval"),
        (999999, False, "not_found"),
        (second.pk, True, "ok"),
        (done.pk, False, "state_conflict"),
    ]
    assert states(first, own, second) == ["approved", "pending", "approved"]


@pytest.mark.django_db
def test_the_api_refuses_bad_bodies_whole(
    inventory: dict[str, Node],
    token_for: Callable[..., str],
) -> None:
    move = ask(user_in("requesters", "rita"), "a100-reserve-000")
    approver = api(token_for("approvers"))
    empty = post(approver, "/api/v1/moves/bulk-approve/", {"ids": []})
    assert empty.status_code == 400 and "ids" in empty.json()["error"]["fields"]
    no_reason = post(approver, "/api/v1/moves/bulk-reject/", {"ids": [move.pk]})
    assert no_reason.status_code == 400
    assert no_reason.json()["error"]["fields"] == {"reason": "Required to reject."}
    too_many = post(approver, "/api/v1/moves/bulk-approve/", {"ids": list(range(1, 102))})
    assert too_many.status_code == 400
    requester = api(token_for("requesters", "rob"))
    assert post(requester, "/api/v1/moves/bulk-approve/", {"ids": [move.pk]}).status_code == 403
    assert states(move) == ["pending"]


@pytest.mark.django_db
def test_the_queries_of_a_bulk_approval_grow_by_a_constant_per_move(
    inventory: dict[str, Node],
    token_for: Callable[..., str],
) -> None:
    rita = user_in("requesters", "rita")
    approver = api(token_for("approvers"))
    nodes = iter(f"a100-reserve-{i:03d}" for i in range(9))
    counts = []
    for size in (1, 2, 3):
        ids = [ask(rita, next(nodes)).pk for _ in range(size)]
        with CaptureQueriesContext(connection) as sql:
            response = post(approver, "/api/v1/moves/bulk-approve/", {"ids": ids})
        assert response.json()["decided"] == size
        counts.append(len(sql))
    print(f"bulk approve queries for 1, 2, 3 moves: {counts}")
    # A move's decision costs about ten queries (lock, approvals, state, audit); the batch
    # adds a fixed few (token, loading the moves), never a query per move per move.
    for size, count in zip((1, 2, 3), counts, strict=True):
        assert count <= 6 + 11 * size, counts


@pytest.mark.django_db
def test_move_all_that_match_sends_the_filter_and_the_form_gets_the_nodes(
    inventory: dict[str, Node],
) -> None:
    client = Client()
    client.force_login(user_in("requesters", "rita"))
    pool_page = client.get("/pools/mixed/?ready=false").content.decode()
    assert 'data-select-all="node"' in pool_page
    link = re.search(r'href="(/moves/new/\?[^"]*)" data-move-matching', pool_page)
    assert link is not None
    url = link.group(1).replace("&amp;", "&")
    assert url == "/moves/new/?match_in=mixed&ready=false"  # the filter, not the names
    form = client.get(url).content.decode()
    nodes = re.search(r'name="nodes"[^>]*value="([^"]*)"', form) or re.search(
        r'name="nodes"[^>]*>([^<]*)<', form
    )
    assert nodes is not None and nodes.group(1).strip() == "a100-reserve-down-000"
    every = client.get("/moves/new/?match_in=mixed").content.decode()
    assert "a100-reserve-008" in every and "a100-train-000" not in every
