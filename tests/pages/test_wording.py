"""The pages' words: counts agree in number, states read as words, lists end cleanly."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from pools.models import Node
from tests.factories import demo_inventory
from tests.moves_helpers import user_in


def client_for(role: str) -> Client:
    client = Client()
    client.force_login(user_in(role))
    return client


@pytest.mark.django_db
def test_cards_pool_page_and_node_page_read_as_sentences() -> None:
    demo_inventory()
    viewer = client_for("viewers")
    overview = viewer.get("/").content.decode()
    training = re.search(r'data-pool="training">(.*?)</article>', overview, re.S).group(1)  # type: ignore[union-attr]
    assert 'data-figure="node-states">all ready<' in training  # not "5 5 ready"
    assert "no free GPU" in training and "0 GPUs on one node" not in training
    pool = viewer.get("/pools/training/").content.decode()
    assert "a move into this pool needs 1 approval." in pool and "moves in need" not in pool
    node = viewer.get("/nodes/a100-train-drift-000/").content.decode()
    drift = re.search(r"<span data-drift>(.*?)</span>", node).group(1)  # type: ignore[union-attr]
    assert drift == "missing taint workload-training=true:NoSchedule."
    assert ";" not in drift


@pytest.mark.django_db
def test_the_pool_form_counts_nodes_in_number() -> None:
    demo_inventory()
    Node.objects.filter(pool__name="shared").delete()
    admin = client_for("pool-admins")
    form = {
        "display_name": "Shared",
        "description": "",
        "labels": "",
        "min_nodes": "0",
        "approvals_required": "1",
        "accepted_gpu_models": "",
        "colour": "#2f9e6a",
        "preview": "1",
    }
    html = admin.post("/pools/shared/edit/", form).content.decode()
    assert "0 nodes carry this pool" in html
    Node.objects.filter(name="gpu-new-000").update(pool_label="shared")
    html = admin.post("/pools/shared/edit/", form).content.decode()
    assert "1 node carries this pool" in html
