"""The Pending page groups the waiting pods by the pool they ask for and their reason, with
counts and a pool column, longest wait first (or most pods, or by pool): a Job's 31 pods
waiting for one reason are one row, not 31 rows repeating the message."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client

from tests.factories import demo_inventory
from tests.fit.rows import TOLERATE_TRAINING, TRAINING_AFFINITY, gpu_pod
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db

SHORT = (
    "0/25 nodes are available: 5 Insufficient nvidia.com/gpu, 20 node(s) didn't match "
    "Pod's node affinity/selector. preemption: 0/25 nodes are available: 5 No preemption "
    "victims found for incoming pod, 20 Preemption is not helpful for scheduling."
)
INFERENCE = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "gpu-pool", "operator": "In", "values": ["inference"]}
                    ]
                }
            ]
        }
    }
}


@pytest.fixture
def waiting(db):  # type: ignore[no-untyped-def]
    demo_inventory()
    for i in range(31):  # one Job's workers, all stopped by the same message
        gpu_pod(
            f"ddp-worker-{i}",
            gpus=8,
            affinity=TRAINING_AFFINITY,
            tolerations=TOLERATE_TRAINING,
            unschedulable_message=SHORT,
            waited=timedelta(minutes=20 + i),
        )
    for i in range(2):
        gpu_pod(
            f"serve-{i}",
            "ml-serving",
            gpus=8,
            affinity=INFERENCE,
            unschedulable_message="0/25 nodes are available: 25 Insufficient nvidia.com/gpu.",
            waited=timedelta(hours=3 + i),
        )
    gpu_pod(
        "anywhere",
        "research",
        gpus=16,
        unschedulable_message="0/25 nodes are available: 25 Insufficient nvidia.com/gpu.",
        waited=timedelta(minutes=5),
    )


def page(query: str = "") -> tuple[int, str]:
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    response = client.get(f"/pending/{query}")
    return response.status_code, unescape(response.content.decode())


def rows(html: str) -> list[tuple[str, int]]:
    """(pool asked for, pods) of each group row, in order."""
    found = re.findall(
        r'<tr data-pending-group="([^"]*)">.*?<td class="n" data-count>(\d+)<', html, re.S
    )
    return [(pool, int(count)) for pool, count in found]


def test_pods_waiting_for_one_reason_are_one_row_with_their_count(waiting) -> None:  # type: ignore[no-untyped-def]
    status, html = page()
    assert status == 200
    # Longest wait first: the inference pods (3 h), the Job (up to 50 min), the pod in no pool.
    assert rows(html) == [("inference", 2), ("training", 31), ("", 1)]
    assert html.count(SHORT) == 1
    assert "34 pods waiting, 3 groups" in html
    # Each pod is still listed under its group, with its fit check.
    assert html.count('data-pod="ml-training/ddp-worker-') == 31
    assert "/fit/?pod=ml-training/ddp-worker-30" in html


def test_the_groups_sort_by_wait_count_or_pool(waiting) -> None:  # type: ignore[no-untyped-def]
    assert rows(page("?sort=count")[1]) == [("training", 31), ("inference", 2), ("", 1)]
    assert rows(page("?sort=pool")[1]) == [("inference", 2), ("training", 31), ("", 1)]
    assert rows(page("?sort=wait")[1]) == [("inference", 2), ("training", 31), ("", 1)]
    status, html = page("?sort=size")
    assert status == 400
    assert "sort: one of wait, count, pool, not 'size'." in html


def test_the_pool_page_groups_its_pending_pods_too(waiting) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    html = unescape(client.get("/pools/training/").content.decode())
    assert rows(html) == [("training", 31)]
    assert html.count(SHORT) == 1
