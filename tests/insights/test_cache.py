"""Computed insights are kept INSIGHTS_CACHE_SECONDS: a second read within that time reads
no pod history; a pool edited since is computed again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from pools.insights import gather
from pools.models import GpuPod, Pool
from tests.insights import scenarios

pytestmark = pytest.mark.django_db


@override_settings(INSIGHTS_CACHE_SECONDS=60)
def test_insights_are_kept_and_computed_again_when_the_pool_changes() -> None:
    cache.clear()
    scenarios.queue()
    pool = Pool.objects.get(name="queue")
    first, _ = gather.pool_insights(pool, days=30, now=scenarios.NOW)
    assert first.queue.queued == 20
    GpuPod.objects.bulk_create(
        [
            scenarios.pod(
                "queue", "queue-000", scenarios.START + timedelta(days=20), wait=timedelta(hours=3)
            )
        ]
    )
    with CaptureQueriesContext(connection) as queries:
        kept, _ = gather.pool_insights(pool, days=30, now=scenarios.NOW)
    assert kept.queue.queued == 20  # the history is not read again
    assert not any("pools_gpupod" in q["sql"] and "julianday" in q["sql"] for q in queries)
    pool.utilisation_target = 70
    pool.save()
    again, _ = gather.pool_insights(pool, days=30, now=scenarios.NOW)
    assert again.queue.queued == 21 and again.utilisation.target == 70
    cache.clear()


@override_settings(INSIGHTS_CACHE_SECONDS=60)
def test_the_refresh_computes_every_pool_and_the_advice_ahead_of_the_pages() -> None:
    cache.clear()
    scenarios.queue()
    assert gather.insights_refresh(days=30, now=scenarios.NOW) == Pool.objects.active().count()
    with CaptureQueriesContext(connection) as queries:
        found = gather.advice(days=30, now=scenarios.NOW)
        pool_found, _ = gather.pool_insights(
            Pool.objects.get(name="queue"), days=30, now=scenarios.NOW
        )
    assert [a.key for a in found] == ["lend:idle+queue"]
    assert pool_found.queue.queued == 20
    assert not any("julianday" in q["sql"] for q in queries)
    cache.clear()
