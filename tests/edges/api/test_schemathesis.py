"""schemathesis against our own OpenAPI schema: no 5xx, every answer as the schema says."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from pools.models import Node, Pool
from pools.tokens import token_create
from portal.wsgi import application
from tests.moves_helpers import user_in


@pytest.fixture
def token(db, redis, prometheus, settings) -> str:  # type: ignore[no-untyped-def]
    # Prometheus answers: a health filter without metrics is a 503 by design
    # (tests/edges/metrics/test_prometheus_unavailable.py), which the no-5xx check would flag.
    settings.PROMETHEUS_URL = prometheus.url
    now = timezone.now()
    mixed = Pool.objects.get(name="mixed")
    for i in range(3):
        Node.objects.create(
            name=f"node-{i}",
            pool=mixed,
            pool_label="mixed",
            gpu_count=8,
            gpu_allocatable=8,
            labels={"gpu-pool": "mixed"},
            last_seen=now,
        )
    # A pool admin can reach every operation, so every operation is exercised.
    return token_create(user=user_in("pool-admins", "fuzzer"), name="schemathesis")[1]


@pytest.fixture
def api_schema(token: str):  # type: ignore[no-untyped-def]
    # As Django's own test client does: a request inside the test's transaction must not
    # close the database connection when it finishes.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi(
            "/api/schema/?format=json", application, headers={"Authorization": f"Bearer {token}"}
        )
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


# What the API promises: no 5xx, and every answer (status, content type, headers, body) as the
# schema says. Not "positive data acceptance": an opaque cursor is a string to the schema,
# and a made-up one is rightly refused with 400.
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]


def test_api_matches_its_schema(api_schema, token: str) -> None:  # type: ignore[no-untyped-def]
    # Every operation, a bounded number of generated requests each (schemathesis' pytest
    # plugin does not run under this pytest, so the loop is ours; the checks are its own).
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 19
    headers = {"Authorization": f"Bearer {token}"}
    for operation in operations:
        # derandomize: the same examples every run, so CI cannot fail by the luck of a
        # draw; new cases come with changes to the schema, not from the dice.
        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=True,
        )
        def check(case) -> None:  # type: ignore[no-untyped-def]
            case.call_and_validate(headers=headers, checks=CHECKS)

        check()
