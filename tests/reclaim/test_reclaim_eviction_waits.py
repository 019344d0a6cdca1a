"""An approved reclaim that must not ask the API server (no cluster here: any call would
fail): past its deadline it fails with the budget's last words; when Prometheus has not
confirmed the pod idle for a while it waits, saying so, rather than act on old figures; and it
ends instead of evicting when the sweep said so, the policy was turned off, the pool retired,
or the pod moved to another pool. Only the worker ends an approved reclaim."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pools import reclaim
from pools.models import AuditEvent, GpuPod, Pool, Reclaim
from pools.reclaim.ending import reclaim_end
from pools.reclaim.evict import idle_confirmed_within, reclaim_evict
from tests.factories import demo_inventory, reclaim_row, running_gpu_pod
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def demo(settings):  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = "/nonexistent/kubeconfig"
    demo_inventory()


def approved(**fields: object) -> Reclaim:
    now = timezone.now()
    values: dict[str, object] = {
        "state": Reclaim.State.APPROVED,
        "decided_at": now - timedelta(hours=2),
        "evict_deadline": now + timedelta(hours=1),
    }
    values.update(fields)
    return reclaim_row(
        "inference",
        namespace="ml-serving",
        pod="embedder-0",
        uid="u-1",
        node="a100-infer-000",
        **values,
    )


def test_past_its_deadline_it_fails_with_the_budgets_words() -> None:
    words = "Cannot evict pod as it would violate the pod's disruption budget."
    reclaim = approved(evict_deadline=timezone.now() - timedelta(seconds=1), refused=words)
    found = reclaim_evict(reclaim.pk, now=timezone.now())
    assert found is not None and found.state == Reclaim.State.FAILED
    assert found.outcome == f"not evicted before the deadline: {words}"
    event = AuditEvent.objects.get(reclaim=reclaim)
    assert event.action == "reclaim.failed" and words in event.message


def test_without_a_recent_sight_of_it_idle_it_waits(settings) -> None:  # type: ignore[no-untyped-def]
    now = timezone.now()
    _pod()
    seen = now - idle_confirmed_within() - timedelta(minutes=1)
    reclaim = approved(last_seen_idle_at=seen)
    found = reclaim_evict(reclaim.pk, now=now)
    assert found is not None and found.state == Reclaim.State.APPROVED
    assert found.refused.startswith("waiting for Prometheus to confirm it is still idle")
    assert found.next_try_at == now + timedelta(seconds=settings.RECLAIM_TICK_SECONDS)
    assert not AuditEvent.objects.filter(reclaim=reclaim).exists()


def _pod(pool: str = "inference") -> GpuPod:
    return running_gpu_pod(
        pool, uid="u-1", namespace="ml-serving", name="embedder-0", node="a100-infer-000"
    )


def test_the_sweeps_word_is_kept_by_the_worker_alone() -> None:
    reclaim = approved()
    now = timezone.now()
    why = "it worked again before its eviction"
    assert reclaim_end(reclaim, Reclaim.State.RECOVERED, why, now)
    reclaim.refresh_from_db()
    assert (reclaim.state, reclaim.finished_at) == (Reclaim.State.APPROVED, None)
    assert not AuditEvent.objects.filter(reclaim=reclaim).exists()
    assert not reclaim_end(reclaim, Reclaim.State.CANCELLED, "policy off", now)  # said once
    found = reclaim_evict(reclaim.pk, now=now)
    assert found is not None and (found.state, found.outcome) == (Reclaim.State.RECOVERED, why)
    assert AuditEvent.objects.get(reclaim=reclaim).action == "reclaim.recovered"


def test_turning_the_policy_off_cancels_at_once_and_stops_an_approved_one() -> None:
    waiting = approved(pod_uid="u-2", state=Reclaim.State.DUE)
    under_way = approved()
    reclaim.reclaim_policy_set(
        pool=Pool.objects.get(name="inference"),
        user=user_in("pool-admins", "paula"),
        enabled=False,
        below_percent=5,
        for_hours=4,
        grace_hours=24,
    )
    waiting.refresh_from_db()
    assert waiting.state == Reclaim.State.CANCELLED and waiting.finished_at is not None
    found = reclaim_evict(under_way.pk, now=timezone.now())
    assert found is not None and found.state == Reclaim.State.CANCELLED
    assert found.outcome == "the pool's reclaim policy was turned off"


@pytest.mark.parametrize("pool", ["training", ""])
def test_a_pod_that_moved_pools_is_not_evicted(pool: str) -> None:
    _pod(pool=pool)
    reclaim = approved()
    found = reclaim_evict(reclaim.pk, now=timezone.now())
    assert found is not None and found.state == Reclaim.State.CANCELLED
    assert f"its node moved to the pool {pool or 'of unassigned nodes'}" in found.outcome


def test_a_retired_pools_approved_reclaim_is_cancelled() -> None:
    reclaim = approved()
    Pool.objects.filter(name="inference").update(retired_at=timezone.now())
    found = reclaim_evict(reclaim.pk, now=timezone.now())
    assert found is not None and found.state == Reclaim.State.CANCELLED
    assert found.outcome == "the pool inference was retired"


def test_a_pod_the_inventory_lost_is_asked_for_not_waited_on(settings) -> None:  # type: ignore[no-untyped-def]
    """No live pod row: the freshness wait is skipped and the API is asked (here no cluster
    is configured, so the attempt waits on the Kubernetes API, saying so)."""
    now = timezone.now()
    reclaim = approved(last_seen_idle_at=now - idle_confirmed_within() - timedelta(hours=1))
    found = reclaim_evict(reclaim.pk, now=now)
    assert found is not None and found.state == Reclaim.State.APPROVED
    assert found.refused.startswith("the Kubernetes API:")
