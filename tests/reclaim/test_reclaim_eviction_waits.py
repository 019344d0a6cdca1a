"""An approved reclaim that must not ask the API server (no cluster here: any call would
fail): past its deadline it fails with the budget's last words, and when Prometheus has not
confirmed the pod idle for a while it waits, saying so, rather than act on old figures."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pools.models import AuditEvent, Reclaim
from pools.reclaim.evict import idle_confirmed_within, reclaim_evict
from tests.factories import demo_inventory, reclaim_row

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
    seen = now - idle_confirmed_within() - timedelta(minutes=1)
    reclaim = approved(last_seen_idle_at=seen)
    found = reclaim_evict(reclaim.pk, now=now)
    assert found is not None and found.state == Reclaim.State.APPROVED
    assert found.refused.startswith("waiting for Prometheus to confirm it is still idle")
    assert found.next_try_at == now + timedelta(seconds=settings.RECLAIM_TICK_SECONDS)
    assert not AuditEvent.objects.filter(reclaim=reclaim).exists()
