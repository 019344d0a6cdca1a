"""Asking for a MIG reconfiguration: bad input is a 400 naming the field, with nothing
created; a good one is a request of its own kind, drain-first, whose plan sets the layout."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pools.models import MoveRequest, Node
from tests.api.conftest import api
from tests.api.test_api_basics import error_of, post
from tests.factories import demo_inventory

pytestmark = pytest.mark.django_db
NODE = "a100-reserve-000"  # pool mixed, A100-80GB


@pytest.fixture
def inventory() -> dict[str, Node]:
    nodes = demo_inventory()
    for name in (NODE, "a100-reserve-001"):
        node = Node.objects.get(name=name)
        node.labels = {**node.labels, "nvidia.com/mig.capable": "true"}
        node.save()
    return nodes


def ask(token: str, **body: object):  # type: ignore[no-untyped-def]
    fields = {"nodes": [NODE], "mig_config": "all-3g.40gb", "reason": "inference slices"}
    return post(api(token), "/api/v1/moves/reconfigure/", {**fields, **body})


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"mig_config": "all-3g.20gb"}, "mig_config", "cannot take 3g.20gb: it takes 1g.10gb"),
        ({"mig_config": "3g"}, "mig_config", "'3g' is not a MIG configuration"),
        ({"nodes": ["h100-infer-000"]}, "mig_config", "do not support MIG"),
        ({"nodes": [NODE, "a100-train-000"]}, "nodes", "nodes of one pool"),
        ({"mig_config": 7}, "mig_config", "Must be a string, not a number"),
    ],
)
def test_bad_input_is_refused_with_the_field_and_nothing_is_created(
    inventory: dict[str, Node], token_for: Callable[[str], str], body: dict, field: str, words: str
) -> None:
    response = ask(token_for("requesters"), **body)
    assert response.status_code == 400, response.content
    error = error_of(response)
    assert words in str(error["fields"][field]), error
    assert not MoveRequest.objects.exists()


def test_a_reconfiguration_is_a_drain_first_request_that_sets_the_layout(
    inventory: dict[str, Node], token_for: Callable[[str], str]
) -> None:
    response = ask(token_for("requesters"), nodes=[NODE, "a100-reserve-001"])
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["kind"], body["mig_config"], body["drain_policy"]) == (
        "reconfigure",
        "all-3g.40gb",
        "drain-first",
    )
    assert body["destination"] == "mixed"
    item = MoveRequest.objects.get().items.get(node__name=NODE)
    assert item.planned_diff["labels_added"] == {
        "nvidia.com/mig.config": "all-3g.40gb",
        "nvidia.com/mig.config.state": "pending",
    }
    assert item.desired["pool"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb"
    # One active request per node, as for moves.
    again = ask(token_for("requesters"))
    assert again.status_code == 409 and error_of(again)["code"] == "active_move"


def test_the_node_page_offers_the_layouts_its_gpus_take_and_asks_for_one(
    inventory: dict[str, Node],
) -> None:
    from django.test import Client

    from tests.moves_helpers import user_in

    client = Client()
    client.force_login(user_in("requesters", "rita"))
    html = client.get(f"/nodes/{NODE}/").content.decode()
    assert 'data-panel="reconfigure"' in html
    assert '<option value="all-3g.40gb"' in html and '<option value="all-disabled"' in html
    assert "all-3g.20gb" not in html  # not a profile of an 80 GB A100
    # A node without MIG is offered none.
    assert 'data-panel="reconfigure"' not in client.get("/nodes/h100-infer-000/").content.decode()
    refused = client.post(
        f"/nodes/{NODE}/reconfigure/", {"mig_config": "all-9g.1gb", "reason": "x"}
    )
    assert refused.status_code == 302 and not MoveRequest.objects.exists()
    asked = client.post(f"/nodes/{NODE}/reconfigure/", {"mig_config": "all-7g.80gb", "reason": "x"})
    move = MoveRequest.objects.get()
    assert asked.status_code == 302 and asked["Location"] == f"/moves/{move.pk}/"
    assert (move.kind, move.mig_config, move.requested_by.username) == (
        "reconfigure",
        "all-7g.80gb",
        "rita",
    )
    # A viewer may look, not ask.
    viewer = Client()
    viewer.force_login(user_in("viewers", "vic"))
    assert 'data-panel="reconfigure"' not in viewer.get(f"/nodes/{NODE}/").content.decode()
    denied = viewer.post(
        f"/nodes/{NODE}/reconfigure/", {"mig_config": "all-7g.80gb", "reason": "x"}
    )
    assert denied.status_code == 403 and MoveRequest.objects.count() == 1
