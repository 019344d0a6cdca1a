"""Why a pod waited is judged against the cluster as it was while it waited: another pool
had room then (its node has since moved into the waiting pod's pool, or gone, or is
cordoned today), so node selection kept the pod out, not shortage or its own pool."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pools.core.insights.queueing import QueueCause
from pools.insights import gather
from pools.membership.stays import stays_follow
from pools.models import GpuPod, MoveItem, MoveRequest, Node, Pool
from tests.insights.scenarios import DAYS, HOUR, NOW, START, make_nodes, make_pool, pod

pytestmark = pytest.mark.django_db


def _queue_with_a_spare_pool_then() -> None:
    make_pool("queue")
    make_pool("spare", dedicated=False)
    (busy,) = make_nodes("queue", 1)
    moved, gone, cordoned = make_nodes("spare", 3)
    stays_follow(None, START)  # the inventory sees every node
    # The queue's node is always full; three 8-GPU pods waited two hours each, while the
    # spare pool's three nodes were free.
    pods = [pod("queue", busy, START, run=None)]
    pods += [
        pod("queue", busy, START + timedelta(days=day), wait=2 * HOUR, run=HOUR)
        for day in (5, 10, 15)
    ]
    GpuPod.objects.bulk_create(pods)
    # Since then: one spare node moved into the queue's pool, one went, one is cordoned.
    queue = Pool.objects.get(name="queue")
    request = MoveRequest.objects.create(
        destination=queue, reason="more room", state=MoveRequest.State.SUCCEEDED
    )
    MoveItem.objects.create(
        request=request,
        node=Node.objects.get(name=moved),
        source_label="spare",
        planned_diff={},
        state=MoveItem.State.DONE,
        active=False,
        finished_at=NOW - timedelta(days=2),
    )
    Node.objects.filter(name=moved).update(pool=queue, pool_label="queue")
    stays_follow([moved], NOW - timedelta(days=2))  # the refresh after the move sees it
    Node.objects.filter(name=gone).update(gone_at=NOW - timedelta(days=1))
    stays_follow([gone], NOW)  # the next sync finds it gone
    Node.objects.filter(name=cordoned).update(cordoned=True)


def test_the_queue_cause_reads_the_pools_as_they_were_when_the_pods_waited() -> None:
    _queue_with_a_spare_pool_then()
    gathered = gather.gather(days=DAYS, now=NOW)
    q = gather.indicators(gathered, Pool.objects.get(name="queue")).queue
    assert q.queued == 3
    # Today the moved node is the queue's own and free, the others are gone or cordoned:
    # read with today's nodes, the pods would have waited with room in their own pool.
    assert q.count(QueueCause.RESTRICTED) == 3, q.by_cause
    assert q.count(QueueCause.OWN_POOL_ROOM) == q.count(QueueCause.SHORTAGE) == 0


def test_a_gang_read_from_the_pod_history_waits_as_one() -> None:
    """Three workers of one PyTorchJob waited two hours while each node of their pool had
    4 GPUs free: room for two of them, and the job starts all three or none."""
    make_pool("gangs")
    nodes = make_nodes("gangs", 2)
    pods = [pod("gangs", n, START, run=None, gpus=4) for n in nodes]
    pods += [
        pod(
            "gangs",
            nodes[0],
            START + timedelta(days=1, seconds=i),
            wait=2 * HOUR,
            gpus=4,
            owner_kind="PyTorchJob",
            owner_name="train",
        )
        for i in range(3)
    ]
    GpuPod.objects.bulk_create(pods)
    stays_follow(None, START)
    gathered = gather.gather(days=DAYS, now=NOW)
    q = gather.indicators(gathered, Pool.objects.get(name="gangs")).queue
    assert q.queued == 3
    assert q.count(QueueCause.SHORTAGE) == 3, q.by_cause
    assert q.count(QueueCause.OWN_POOL_ROOM) == 0
