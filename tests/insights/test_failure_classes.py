"""One failure classifier: the workload profiles, a pool's insights and the advisor count the
same failures the same way, and the pages name each class as an operator reads it."""

from __future__ import annotations

import pytest
from django.test import Client

from pools.core.insights.advisor import Rule
from pools.core.insights.failures import CAUSE_TITLES, Cause, cause_breakdown
from pools.insights import gather
from pools.metrics import insights as metrics
from pools.models import Pool
from tests.insights import scenarios
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> scenarios.World:
    found = scenarios.failure_classes()
    # Prometheus's XID errors, as the scenario's nodes logged them.
    monkeypatch.setattr(metrics, "xid_times", lambda *, days: (found.xid_times, None))
    return found


def test_profiles_insights_and_the_advisor_agree_on_every_count(world: scenarios.World) -> None:
    now = scenarios.NOW
    (profile,) = gather.profiles(days=30, by="namespace", now=now).profiles
    pool_view, _ = gather.pool_insights(Pool.objects.get(name="serving"), days=30, now=now)
    expected = {Cause(k): n for k, n in scenarios.FAILURE_CLASSES.items()}

    assert dict(profile.failures) == expected
    assert {c: n for c, n in pool_view.failures.counts.items() if n} == expected
    assert profile.failed == pool_view.failures.total == sum(expected.values())
    (advice,) = [a for a in gather.advice(days=30, now=now) if a.rule == Rule.GPU_FAULTS]
    assert f"Failures by cause: {cause_breakdown(expected)}." in advice.evidence
    assert advice.evidence[0].startswith("11 of 21 failures are")


def session() -> Client:
    client = Client()
    client.force_login(user_in("viewers", "failure-viewer"))
    return client


def test_the_pages_name_every_class_with_examples_never_a_raw_key(
    world: scenarios.World,
) -> None:
    client = session()
    html = client.get("/pools/serving/insights/?days=30").content.decode()
    failures = html.split('id="failures"', 1)[1].split('id="replacement"', 1)[0]
    for cause, title in CAUSE_TITLES.items():
        count = scenarios.FAILURE_CLASSES[str(cause)]
        assert f'<tr data-cause="{cause}"><th>{title}</th><td>{count}</td>' in failures
    assert "OutOfnvidia.com/gpu" in failures and "DeadlineExceeded" in failures
    assert "CUDA driver version is insufficient" in failures
    assert ">gpu_fault<" not in failures and "gpu_fault " not in failures

    profiles = client.get("/insights/profiles/?days=30&by=namespace").content.decode()
    assert "GPU or driver fault 11" in profiles and "timeout 3" in profiles
    assert "lack of resources 2" in profiles
    assert "gpu_fault 11" not in profiles
