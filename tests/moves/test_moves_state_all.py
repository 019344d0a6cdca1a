"""`state=all` means every state wherever the move list's FilterSet serves: the page, its
CSV export and the API (issue 25, U9)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.models import Pool
from pools.tokens import token_create
from tests.api.conftest import api
from tests.edges.pages.test_filters import page_rows
from tests.factories import demo_inventory
from tests.moves_helpers import user_in
from tests.pages.test_exports import download


@pytest.mark.django_db
def test_state_all_lists_every_move_on_the_page_in_the_export_and_in_the_api() -> None:
    demo_inventory()
    asked = [
        moves.move_request_create(
            requested_by=user_in("requesters", "rita"),
            node_names=[name],
            destination=Pool.objects.get(name="training"),
            reason="why",
            now=timezone.now(),
        )
        for name in ("a100-reserve-000", "a100-reserve-001")
    ]
    moves.move_reject(
        request=asked[1], approver=user_in("approvers"), reason="no", now=timezone.now()
    )
    every = {str(m.pk) for m in asked}
    viewer = Client()
    viewer.force_login(user_in("viewers"))

    assert page_rows(viewer, "/moves/?state=all", "data-move") == every
    assert {row["id"] for row in download(viewer, "/export/moves.csv?state=all")} == every
    token = token_create(user=user_in("viewers"), name="t")[1]
    answer = api(token).get("/api/v1/moves/?state=all")
    assert answer.status_code == 200, answer.content
    assert {str(m["id"]) for m in answer.json()["results"]} == every
    # The page's export link carries its tab, and the export reads it the same way.
    assert (
        'href="/export/moves.csv?state=all" data-export="moves"'
        in viewer.get("/moves/?state=all").content.decode()
    )
