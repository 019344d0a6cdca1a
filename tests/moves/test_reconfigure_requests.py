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


PLUGIN_CONFIGS = "default=whole,time-sliced-4=time-slicing:4"


@pytest.fixture
def sharing(settings) -> None:  # type: ignore[no-untyped-def]
    from pools.core.plugin_configs import parse_plugin_configs

    settings.DEVICE_PLUGIN_CONFIGS = parse_plugin_configs(PLUGIN_CONFIGS)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"mig_config": "", "plugin_config": "tesla-t4"}, "plugin_config", "not a device plugin"),
        ({"plugin_config": "time-sliced-4"}, "plugin_config", "either a MIG configuration"),
        ({"mig_config": ""}, "mig_config", "either a MIG configuration"),
        ({"mig_config": "", "plugin_config": 4}, "plugin_config", "Must be a string"),
    ],
)
def test_a_sharing_reconfiguration_with_bad_input_is_refused_naming_the_field(
    inventory: dict[str, Node],
    sharing: None,
    token_for: Callable[[str], str],
    body: dict,
    field: str,
    words: str,
) -> None:
    response = ask(token_for("requesters"), **body)
    assert response.status_code == 400, response.content
    assert words in str(error_of(response)["fields"][field]), error_of(response)
    assert not MoveRequest.objects.exists()


def test_a_node_split_into_mig_instances_cannot_be_shared(
    inventory: dict[str, Node], sharing: None, token_for: Callable[[str], str]
) -> None:
    node = Node.objects.get(name=NODE)
    node.gpu_allocatable = 0
    node.devices = {
        "model": "NVIDIA-A100-SXM4-80GB",
        "gpus": 8,
        "mig_gpus": 8,
        "units": [["mig", "nvidia.com/mig-1g.10gb", "1g.10gb", "", 1, 56]],
    }
    node.save()
    response = ask(token_for("requesters"), mig_config="", plugin_config="time-sliced-4")
    assert response.status_code == 400
    assert "all-disabled first" in str(error_of(response)["fields"]["plugin_config"])


def test_a_sharing_reconfiguration_sets_the_device_plugins_configuration(
    inventory: dict[str, Node], sharing: None, token_for: Callable[[str], str]
) -> None:
    response = ask(token_for("requesters"), mig_config="", plugin_config="time-sliced-4")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["kind"], body["plugin_config"], body["mig_config"], body["drain_policy"]) == (
        "reconfigure",
        "time-sliced-4",
        "",
        "drain-first",
    )
    item = MoveRequest.objects.get().items.get()
    assert item.planned_diff["labels_added"] == {"nvidia.com/device-plugin.config": "time-sliced-4"}


def test_the_node_page_offers_the_sites_sharing_configurations(
    inventory: dict[str, Node], sharing: None
) -> None:
    from django.test import Client

    from tests.moves_helpers import user_in

    client = Client()
    client.force_login(user_in("requesters", "rosa"))
    html = client.get(f"/nodes/{NODE}/").content.decode()
    assert 'data-panel="reconfigure-sharing"' in html
    assert '<option value="time-sliced-4" >time-sliced-4 (time-slicing, 4 per GPU)</option>' in html
    asked = client.post(
        f"/nodes/{NODE}/reconfigure/", {"plugin_config": "time-sliced-4", "reason": "notebooks"}
    )
    move = MoveRequest.objects.get()
    assert asked.status_code == 302 and move.plugin_config == "time-sliced-4"
