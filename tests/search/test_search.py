"""Search from every page and GET /api/v1/search/: nodes, pods, moves, pools, grouped."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from pools import moves
from pools.core.search import label_matches, parse_query, pod_matches
from pools.models import Node, Pool
from pools.tokens import token_create
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in


def test_query_forms() -> None:
    assert parse_query(" #12 ").move_id == 12
    assert parse_query("12").move_id == 12
    assert parse_query("a100-12").move_id is None
    q = parse_query("nvidia.com/gpu.product=NVIDIA-L40S")
    assert (q.label_key, q.label_value, q.needle) == (
        "nvidia.com/gpu.product",
        "NVIDIA-L40S",
        "NVIDIA-L40S",
    )
    assert parse_query("=x").label_key is None  # no key: plain text


def test_labels_match_by_value_not_by_key() -> None:
    labels = {"gpu-pool": "training", "workload-type": "training", "zone": "eu-1"}
    assert label_matches(labels, parse_query("TRAIN")) == [
        "gpu-pool=training",
        "workload-type=training",
    ]
    assert label_matches(labels, parse_query("workload")) == []
    assert label_matches(labels, parse_query("zone=EU-1")) == ["zone=eu-1"]
    assert label_matches(labels, parse_query("zone=eu")) == []  # key=value is exact


@given(st.text(min_size=1, max_size=20).filter(lambda t: t.strip() and "=" not in t))
def test_a_pod_always_finds_itself_by_its_name_and_namespace(name: str) -> None:
    pods = [{"name": name.strip(), "namespace": "ns"}, {"name": "other", "namespace": "ns"}]
    assert pods[0] in pod_matches(pods, parse_query(name))
    assert pods[0] in pod_matches(pods, parse_query(f"ns/{name.strip()}"))


@pytest.fixture
def viewer() -> Client:
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    return client


def _groups(page: str) -> dict[str, str]:
    found = re.findall(r'<section class="panel" data-group="(\w+)">(.*?)</section>', page, re.S)
    return dict(found)


@pytest.mark.django_db
def test_page_groups_nodes_pods_moves_and_pools(viewer: Client) -> None:
    demo_inventory()
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=Pool.objects.get(name="training"),
        reason="more training",
        now=timezone.now(),
    )
    page = viewer.get("/search/", {"q": "h100-infer-001"}).content.decode()
    assert list(_groups(page)) == ["nodes", "pods"]
    assert 'href="/nodes/h100-infer-001/"' in _groups(page)["nodes"]
    # The pod named after the node: which node and which pool hold it.
    pods = _groups(page)["pods"]
    assert "ml-serving/llm-serving-h100-infer-001" in pods
    assert 'href="/pools/inference/"' in pods

    page = viewer.get("/search/", {"q": "nvidia.com/gpu.product=NVIDIA-L40S"}).content.decode()
    assert re.findall(r'href="/nodes/([^/]+)/"', _groups(page)["nodes"]) == [
        "gpu-new-000",
        "gpu-new-001",
    ]

    page = viewer.get("/search/", {"q": f"#{move.pk}"}).content.decode()
    assert f'href="/moves/{move.pk}/"' in _groups(page)["moves"]

    page = viewer.get("/search/", {"q": "Infer"}).content.decode()
    assert 'href="/pools/inference/"' in _groups(page)["pools"]
    assert "Nothing matches" in viewer.get("/search/", {"q": "no-such-thing"}).content.decode()


@pytest.mark.django_db
def test_a_query_too_long_or_with_a_null_character_is_a_400(viewer: Client) -> None:
    for bad, says in (("x" * 201, "At most 200 characters."), ("a\x00b", "Null characters")):
        response = viewer.get("/search/", {"q": bad})
        assert response.status_code == 400
        assert says in response.content.decode()
    assert api_status("/api/v1/search/?q=a%00b") == 400


def api_status(path: str) -> int:
    return api(token_create(user=user_in("viewers", "vic"), name="t")[1]).get(path).status_code


@pytest.mark.django_db
def test_the_box_is_on_every_page(viewer: Client) -> None:
    demo_inventory()
    for url in ("/", "/pools/training/", "/nodes/gpu-new-000/", "/moves/", "/audit/"):
        page = viewer.get(url).content.decode()
        assert re.search(r'<form class="navsearch" role="search"[^>]*action="/search/"', page), url


@pytest.mark.django_db
def test_search_needs_a_login_and_the_view_role() -> None:
    assert Client().get("/search/?q=x").status_code == 302
    nobody = Client()
    nobody.force_login(user_in("no-role-at-all", "nora"))
    assert nobody.get("/search/?q=x").status_code == 403
    assert api().get("/api/v1/search/?q=x").status_code == 401


@pytest.mark.django_db
def test_api_search() -> None:
    demo_inventory()
    client = api(token_create(user=user_in("viewers", "vic"), name="t")[1])
    body = client.get("/api/v1/search/", {"q": "notebook-a100-reserve-003"}).json()
    assert body["pods"] == [
        {
            "cluster": "default",
            "name": "notebook-a100-reserve-003",
            "namespace": "research",
            "node": "a100-reserve-003",
            "pool": "mixed",
            "gpus": 1,
        }
    ]
    assert body["total"] == 1 and body["nodes"] == body["moves"] == body["pools"] == []

    body = client.get("/api/v1/search/", {"q": "a100", "limit": 3}).json()
    assert len(body["nodes"]) == 3
    assert body["more"]["nodes"] == Node.objects.filter(name__contains="a100").count() - 3

    bad_queries = [
        ({}, "q"),
        ({"q": "  "}, "q"),
        ({"q": "x" * 201}, "q"),
        ({"q": "x", "limit": 0}, "limit"),
    ]
    for bad, field in bad_queries:
        response = client.get("/api/v1/search/", bad)
        assert response.status_code == 400, bad
        assert field in response.json()["error"]["fields"], bad
