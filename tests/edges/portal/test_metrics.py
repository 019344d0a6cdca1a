"""The portal's own /metrics, in this process: who may read it, and that each figure moves
when the thing it counts happens (a page, a PATCH, a retry, a sync, a query, a cache hit,
a move's state, a queued task). The multiprocess cases (gunicorn, a Celery worker) are in
tests/edges/portal/test_metrics_processes.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools import tasks
from pools.common import observability
from pools.inventory import inventory_sync
from pools.kube.errors import KubeError
from pools.kube.patcher import apply_pool
from pools.metrics import source
from pools.models import MoveRequest, Pool
from pools.moves import move_reject, move_request_create
from tests.factories import demo_inventory
from tests.kubesim_process import Kubesim
from tests.metrics_scrape import TOKEN, Samples, parse, total, value
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, RedisServer, free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(settings) -> str:  # type: ignore[no-untyped-def]
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


def metrics(client: Client | None = None) -> Samples:
    response = (client or Client()).get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse(response.content.decode())


# --- who may read it ---


def test_without_a_token_configured_there_is_no_endpoint(settings) -> None:  # type: ignore[no-untyped-def]
    settings.METRICS_TOKEN = None
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404


@pytest.mark.parametrize(
    "authorization",
    [None, "", f"Bearer {TOKEN}x", f"Basic {TOKEN}", "Bearer", f"Token {TOKEN}", TOKEN],
)
def test_a_missing_or_wrong_token_is_refused(token: str, authorization: str | None) -> None:
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    response = Client().get("/metrics", **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"portal_" not in response.content


def test_the_token_needs_no_login_nor_https(token: str, settings) -> None:  # type: ignore[no-untyped-def]
    settings.SECURE_SSL_REDIRECT = True  # as in production: pages are redirected to HTTPS
    client = Client()
    assert client.get("/").status_code == 301
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


# --- the web's own figures ---


def test_a_page_and_an_api_call_are_timed_by_view(token: str) -> None:
    demo_inventory()
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    before = metrics()
    assert client.get("/").status_code == 200
    assert client.get("/pools/training/").status_code == 200
    assert client.get("/api/v1/nodes/").status_code == 200
    assert client.get("/no/such/page/").status_code == 404
    after = metrics()
    name = "portal_http_request_duration_seconds_count"
    for view, status in [
        ("home", "2xx"),
        ("pool-detail", "2xx"),
        ("api:node-list", "2xx"),
        ("unmatched", "4xx"),
    ]:
        labels = {"view": view, "method": "GET", "status": status}
        assert value(after, name, **labels) - value(before, name, **labels) == 1, view
    # The scrape before counts itself once it has answered.
    assert value(after, name, view="metrics", method="GET", status="2xx") >= 1


def test_moves_by_state_cost_one_query_whatever_their_number(token: str) -> None:
    demo_inventory()
    now = timezone.now()
    names = ["a100-reserve-000", "a100-reserve-001", "a100-reserve-002"]
    moves = [
        move_request_create(
            requested_by=user_in("requesters", "rita"),
            node_names=[name],
            destination=Pool.objects.get(name="shared"),
            reason="metrics",
            now=now,
        )
        for name in names
    ]
    move_reject(request=moves[0], approver=user_in("approvers", "arno"), reason="not now", now=now)
    with CaptureQueriesContext(connection) as queries:
        samples = metrics()
    assert len(queries) == 1
    assert value(samples, "portal_moves", state="pending") == 2
    assert value(samples, "portal_moves", state="rejected") == 1
    assert value(samples, "portal_moves", state="succeeded") == 0  # every state, zeros too
    assert {s for (n, labels), _ in samples.items() if n == "portal_moves" for _, s in labels} == (
        set(MoveRequest.State.values)
    )
    assert value(samples, "portal_metrics_collector_up", collector="moves") == 1


def test_the_queue_length_comes_from_redis_and_never_fails_the_scrape(
    token: str,
    redis: RedisServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.CELERY_BROKER_URL = redis.url
    from portal.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.client.delete("celery")
    for _ in range(3):
        tasks.purge_idempotency_records.delay()  # no worker runs: they wait in Redis
    samples = metrics()
    assert value(samples, "portal_celery_queue_length", queue="celery") == 3
    assert value(samples, "portal_metrics_collector_up", collector="celery_queue") == 1
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens
    samples = metrics()
    assert value(samples, "portal_metrics_collector_up", collector="celery_queue") == 0
    assert ("portal_celery_queue_length", frozenset({("queue", "celery")})) not in samples
    assert value(samples, "portal_metrics_collector_up", collector="moves") == 1


# --- the edges' figures: Kubernetes, the inventory, Prometheus ---


def test_patches_conflicts_and_retries_are_counted_as_kubesim_saw_them(
    cluster: Kubesim,
    token: str,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PATCH_MAX_CONFLICTS = 5
    before = metrics()
    cluster.control(
        "faults",
        {
            "fail_next": [{"status": 503, "count": 2, "verb": "patch"}],
            "conflicts": {"gpu-new-000": 1},
        },
    )
    apply_pool("gpu-new-000", Pool(name="mixed").spec(), [])
    after = metrics()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    codes = [
        e["responseStatus"]["code"]
        for e in cluster.audit_events()
        if e["verb"] == "patch" and e["objectRef"]["resource"] == "nodes"
    ]
    assert sorted(codes) == [200, 409, 503, 503]
    patches = "portal_kube_patch_requests_total"
    assert delta(patches, outcome="ok", code="200") == 1
    assert delta(patches, outcome="conflict", code="409") == 1
    assert delta(patches, outcome="unavailable", code="503") == 2
    assert delta("portal_kube_retries_total", reason="503") == 2


def test_refused_and_unanswered_patches_are_counted(
    cluster: Kubesim,
    token: str,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    name = "portal_kube_patch_requests_total"
    before = metrics()
    with pytest.raises(KubeError, match="404"):
        apply_pool("no-such-node", Pool(name="mixed").spec(), [])
    assert total(metrics(), name) == total(before, name)  # the read failed: no PATCH sent
    cluster.control("faults", {"fail_next": [{"status": "drop", "count": 1, "verb": "patch"}]})
    apply_pool("gpu-new-000", Pool(name="mixed").spec(), [])
    settings.KUBE_CONTEXT = "kubesim-readonly"  # may read nodes, not patch them
    with pytest.raises(KubeError, match="403"):
        apply_pool("gpu-new-001", Pool(name="mixed").spec(), [])
    after = metrics()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta(name, outcome="unreachable", code="none") == 1
    assert delta("portal_kube_retries_total", reason="unreachable") == 1
    assert delta(name, outcome="ok", code="200") == 1
    assert delta(name, outcome="refused", code="403") == 1


def test_an_inventory_sync_is_timed_and_stamped(cluster: Kubesim, token: str, settings) -> None:  # type: ignore[no-untyped-def]
    before = metrics()
    started = timezone.now().timestamp()
    inventory_sync()
    after = metrics()
    name = "portal_inventory_sync_duration_seconds_count"
    assert value(after, name, outcome="ok") - value(before, name, outcome="ok") == 1
    stamp = "portal_inventory_last_sync_timestamp_seconds"
    assert value(after, stamp, outcome="ok") >= started
    settings.KUBECONFIG = str(cluster.kubeconfig.with_name("missing"))
    from pools.kube.client import _api_client

    _api_client.cache_clear()
    with pytest.raises(KubeError):
        inventory_sync()
    _api_client.cache_clear()
    failed = metrics()
    assert value(failed, name, outcome="failed") - value(after, name, outcome="failed") == 1
    assert value(failed, stamp, outcome="ok") == value(after, stamp, outcome="ok")
    assert value(failed, stamp, outcome="failed") >= value(after, stamp, outcome="ok")


def test_the_watch_lag_is_a_gauge_the_watcher_sets(token: str) -> None:
    observability.watch_lag_set(2.5)
    observability.watch_lag_set(0.5, resource="pods")
    samples = metrics()
    assert value(samples, "portal_inventory_watch_lag_seconds", resource="nodes") == 2.5
    assert value(samples, "portal_inventory_watch_lag_seconds", resource="pods") == 0.5
    observability.watch_lag_set(-1)  # a clock skewed the other way is no lag
    assert value(metrics(), "portal_inventory_watch_lag_seconds", resource="nodes") == 0


def test_prometheus_queries_their_failures_and_the_cache_are_counted(
    token: str,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_URL = prometheus.url
    settings.METRICS_CACHE_SECONDS = 60
    before = metrics()
    query = {"up": f"vector({timezone.now().timestamp()})"}  # a query no other test sent
    assert source.instant(query).available
    assert source.instant(query).available  # from the cache
    assert source.history("vector(1)", span=timedelta(minutes=5), step=timedelta(minutes=1)).points
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    assert not source.instant({"down": "vector(2)"}).available
    after = metrics()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    seconds = "portal_prometheus_query_duration_seconds_count"
    assert delta(seconds, kind="instant") == 2  # one answered, one refused
    assert delta(seconds, kind="range") == 1
    assert delta("portal_prometheus_query_failures_total", kind="instant", error="ConnectionError")
    cache = "portal_metrics_cache_lookups_total"
    assert delta(cache, cache="instant", result="miss") == 2
    assert delta(cache, cache="instant", result="hit") == 1
    assert delta(cache, cache="range", result="miss") == 1
