"""SQL queries per view, kept as data: one table of baselines, checked on a small and a large
world.

Each view must cost exactly its baseline at both sizes: more is a regression (a query per
row, a missing select_related), a count that grows with the data is one too, and fewer
means the baseline should come down with the change that earned it. PromQL counts are
checked against a real Prometheus in tests/edges/metrics/test_dashboard_scale.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.models import AuditEvent, Drill, MoveRequest, Node, Pool
from pools.moves import move_approve, move_request_create
from pools.tokens import token_create
from tests.api.conftest import api
from tests.factories import Group, demo_inventory, gpu_node, node_and_pods, store
from tests.fit.rows import TOLERATE_TRAINING, TRAINING_AFFINITY, gpu_pod
from tests.moves_helpers import user_in

NODE = "a100-infer-000"
BASELINES: dict[str, int] = {
    # Pages, for a viewer's session. Each whole page reads the inventory lease's row once, to
    # say when the nodes shown may be stale (pools.inventory.freshness); partials do not.
    "/": 7,  # the first: the per-pool figures are made (read from the cache after)
    "/pools/": 5,
    "/pools/training/": 17,  # the pending list (4), the intruders (3), the snippet's resource (1)
    # Fetched by the page once loaded: the pool, its nodes, the moves holding them, their
    # GPU pods.
    "/pools/training/?partial=headroom": 7,
    "/pools/unassigned/": 8,
    # The node table is paged (1,000 and more nodes at the large size): its count and
    # its page's rows, by a column or by a DCGM figure.
    "/pools/mixed/?partial=live": 7,
    "/pools/mixed/?partial=live&sort=-util&page=2": 7,
    "/pools/mixed/?partial=live&ready=true&sort=-gpus&page=3": 7,
    f"/nodes/{NODE}/": 8,
    "/moves/?state=all": 7,
    "/moves/{move}/": 10,
    "/loans/": 8,
    "/audit/": 7,
    "/tokens/": 5,
    "/search/?q=a100": 7,
    "/search/?q=%23{move}": 8,
    # The charts read the pool's members over the chart's range and which of them are
    # NotReady now (never idle: 2); the insights read the nodes as they were (the stays of
    # every pool, and nodes gone since) and the gangs of the pods that queued: 3 more.
    "/pools/training/insights/": 20,
    "/insights/profiles/": 6,
    "/advice/": 15,
    "/pending/": 8,
    "/fit/?pod=ml-training/big-train": 9,
    "/pools/training/drills/": 6,
    # The API, for a viewer's token.
    "/api/v1/summary/": 4,
    "/api/v1/pools/": 3,
    "/api/v1/nodes/": 4,  # with the inventory's version, read before the rows
    f"/api/v1/nodes/{NODE}/": 4,
    "/api/v1/moves/": 6,
    "/api/v1/moves/{move}/": 6,
    "/api/v1/audit-events/": 3,
    "/api/v1/search/?q=a100": 5,
    "/api/v1/pools/training/insights/": 16,
    "/api/v1/pools/training/headroom/": 6,
    "/api/v1/profiles/": 4,
    "/api/v1/advice/": 13,
    "/api/v1/drills/": 3,
}
SIZES = {"small": (10, 3), "large": (1000, 12)}  # extra nodes, moves


def build_world(extra_nodes: int, moves: int) -> dict[str, str]:
    """The demo scenario, `extra_nodes` more in the mixed pool, a gone node, and `moves`
    requests (two nodes each, every other one approved once of the two approvals the
    destination needs, every third one a loan)."""
    demo_inventory()
    store(node_and_pods(f"extra-{i:04d}", Group("extra", 1, "mixed")) for i in range(extra_nodes))
    shared = Pool.objects.get(name="shared")
    Pool.objects.filter(name="shared").update(approvals_required=2)
    now = timezone.now()
    first = None
    for i in range(moves):
        move = move_request_create(
            requested_by=user_in("requesters", f"r{i}"),
            node_names=[f"extra-{2 * i:04d}", f"extra-{2 * i + 1:04d}"],
            destination=shared,
            reason=f"move {i}",
            loan_until=now + timedelta(hours=4) if i % 3 == 0 else None,
            now=now,
        )
        if i % 2 == 0:
            move_approve(request=move, approver=user_in("approvers", f"a{i}"), now=now)
        first = first or move
    fit_pods(extra_nodes)
    past_drills(moves)
    gone = gpu_node("gone-000", "training")
    Node.objects.filter(pk=gone.pk).update(gone_at=now)
    assert first is not None and AuditEvent.objects.count() >= moves
    return {"move": str(first.pk)}


def past_drills(count: int) -> None:
    """Finished drills on the training pool, each by its own pool admin."""
    now = timezone.now()
    for i in range(count):
        Drill.objects.create(
            pool=Pool.objects.get(name="training"),
            node_name="a100-train-000",
            state=Drill.State.PASSED,
            started_by=user_in("pool-admins", f"d{i}"),
            ends_at=now,
            checks=[{"name": "restored", "title": "t", "status": "pass", "detail": "d"}],
        )


def fit_pods(extra_nodes: int) -> None:
    """GPU pods for the pending and intruder lists: one Pending pod the scheduler explained,
    one it did not, and a pod bound to every extra node (half of them intruders in training)."""
    gpu_pod("big-train", gpus=8, affinity=TRAINING_AFFINITY, unschedulable_message="0/25 ...")
    gpu_pod("eval-job-2", gpus=2, affinity=TRAINING_AFFINITY, tolerations=TOLERATE_TRAINING)
    for i in range(extra_nodes):
        gpu_pod(f"on-extra-{i}", "research", node=f"extra-{i:04d}")
    gpu_pod("stray", "research", node="a100-train-000")


def measure(world: dict[str, str]) -> dict[str, int]:
    viewer = user_in("viewers", "vera")
    session = Client()
    session.force_login(viewer)
    token = api(token_create(user=viewer, name="counts")[1])
    token.get("/api/v1/pools/")  # the token's last-used stamp is written once a minute
    counts = {}
    for path in BASELINES:
        client = token if path.startswith("/api/") else session
        with CaptureQueriesContext(connection) as queries:
            response = client.get(path.format(**world))
        assert response.status_code == 200, (path, response.status_code)
        counts[path] = len(queries)
    return counts


@pytest.mark.django_db
@pytest.mark.parametrize("size", list(SIZES))
def test_every_view_costs_its_baseline(size: str, settings) -> None:  # type: ignore[no-untyped-def]
    # Each API request finds its token and the user's roles (2 queries): a web process
    # that remembers them (API_TOKEN_CACHE_SECONDS) saves those, as
    # tests/api/test_token_memo.py shows; these counts must not hang on the clock.
    settings.API_TOKEN_CACHE_SECONDS = 0
    extra, moves = SIZES[size]
    counts = measure(build_world(extra, moves))
    assert MoveRequest.objects.count() == moves
    assert counts == BASELINES, counts
