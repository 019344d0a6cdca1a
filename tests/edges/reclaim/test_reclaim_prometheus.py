"""Reclaim candidates and the teams' held-idle GPU-hours from a real Prometheus scraping
kubesim's DCGM exporter: the notebook pod on a GPU kept at 0 % is a candidate of the mixed
pool once its policy is on, the busy ones are not; its owner, contact and opt-out come from
its labels and annotations; the teams' view counts its GPU-hours; a Prometheus that cannot
answer is said, not guessed. Then the sweep: each candidate's owner told once, the grace, an
opt-out, the policy turned off, and in the demo an approved reclaim that evicts an embedder."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone
from kubernetes.client.exceptions import ApiException

from pools.common.events import reclaim_event
from pools.inventory import inventory_sync
from pools.metrics.queries import idle_hours_query
from pools.models import AuditEvent, GpuPod, Pool, Reclaim
from pools.reclaim.notifications import reclaim_email
from pools.reclaim.sweep import reclaims_advance
from tests.api.conftest import api
from tests.factories import reclaim_row, running_gpu_pod
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, prometheus_server, wait_for

pytestmark = pytest.mark.django_db
IDLE_NODE = "a100-reserve-000"
BUSY_NODES = [f"a100-reserve-00{i}" for i in range(1, 9)]
POLICY = {"enabled": True, "below_percent": 5, "for_hours": 1, "grace_hours": 12}


def _scraped(prom: PrometheusServer, promql: str) -> bool:
    import json
    import urllib.parse
    import urllib.request

    url = f"{prom.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return bool(json.loads(answer.read())["data"]["result"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim")) as sim:
        sim.control("gpus", {"node": IDLE_NODE, "gpu": "all", "util": 0})
        for node in BUSY_NODES:
            sim.control("gpus", {"node": node, "gpu": "all", "util": 80})
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(tmp_path_factory.mktemp("prom"), scrape_targets=[target]) as prom:
            wait_for(
                lambda: _scraped(
                    prom, f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{IDLE_NODE}", exported_pod!=""}} == 0'
                ),
                timeout=60,
                what="the idle notebook's GPU to be scraped",
            )
            # The held-idle hours are counted in one-minute steps on whole minutes: the
            # first step after the first scrape.
            wait_for(
                lambda: _scraped(
                    prom, idle_hours_query("exported_pod", "exported_namespace", 7, 1)
                ),
                timeout=90,
                what="a whole minute of idle samples",
            )
            yield sim, prom


@pytest.fixture
def portal(stack, settings) -> Kubesim:  # type: ignore[no-untyped-def]
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.PROMETHEUS_TIMEOUT = 30
    settings.METRICS_CACHE_SECONDS = 0
    inventory_sync()
    return sim


def _idle_pod() -> GpuPod:
    return GpuPod.objects.live().get(node_name=IDLE_NODE, units__gt=0)


def test_the_idle_pod_is_a_candidate_once_the_policy_is_on(portal: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    viewer = api(token_for("viewers"))
    off = viewer.get("/api/v1/pools/mixed/reclaim/").json()
    assert off["policy"]["enabled"] is False and off["candidates"] == []

    admin = api(token_for("pool-admins", "paula"))
    saved = admin.put("/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json")
    assert saved.status_code == 200, saved.content
    assert AuditEvent.objects.filter(action="reclaim.policy_set").count() == 1

    pod = _idle_pod()
    body = viewer.get("/api/v1/pools/mixed/reclaim/").json()
    assert body["metrics_error"] is None
    (candidate,) = body["candidates"]
    assert (candidate["namespace"], candidate["pod"], candidate["node"]) == (
        pod.namespace,
        pod.name,
        IDLE_NODE,
    )
    assert candidate["units"] == pod.units == 1 and candidate["opted_out"] is False
    assert candidate["idle_hours"] >= 1 and candidate["gpu_hours"] == candidate["idle_hours"]

    page = Client()
    page.force_login(user_in("viewers", "vera"))
    html = page.get("/pools/mixed/reclaim/").content.decode()
    assert f'data-candidate="{pod.namespace}/{pod.name}"' in html


def test_the_owner_contact_and_opt_out_come_from_the_pod(portal: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    api(token_for("pool-admins", "paula")).put(
        "/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json"
    )
    pod = _idle_pod()
    portal.core().patch_namespaced_pod(
        pod.name,
        pod.namespace,
        {
            "metadata": {
                "annotations": {
                    "gpu-portal.io/contact": "research-gpus@example.com",
                    "gpu-portal.io/reclaim": "never",
                }
            }
        },
    )
    inventory_sync()
    (candidate,) = (
        api(token_for("viewers")).get("/api/v1/pools/mixed/reclaim/").json()["candidates"]
    )
    assert candidate["contact"] == "research-gpus@example.com" and candidate["opted_out"] is True
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    assert "data-opted-out" in page.get("/pools/mixed/reclaim/").content.decode()


def test_the_teams_held_idle_gpu_hours(portal: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    pod = _idle_pod()
    body = api(token_for("viewers")).get("/api/v1/teams/idle/").json()
    assert body["metrics_error"] is None
    team = pod.team or f"namespace {pod.namespace}"
    row = {t["team"]: t for t in body["teams"]}[team]
    assert 0 < row["gpu_hours_7d"] <= row["gpu_hours_30d"]
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    assert f'data-team="{team}"' in page.get("/insights/idle/").content.decode()


def test_a_prometheus_that_cannot_answer_is_said(portal: Kubesim, token_for, settings) -> None:  # type: ignore[no-untyped-def]
    api(token_for("pool-admins", "paula")).put(
        "/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json"
    )
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    body = api(token_for("viewers")).get("/api/v1/pools/mixed/reclaim/").json()
    assert body["candidates"] == [] and body["metrics_error"]
    teams = api(token_for("viewers")).get("/api/v1/teams/idle/").json()
    assert teams["teams"] == [] and teams["metrics_error"]


def _sweep(at, capture) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    with capture(execute=True):
        return reclaims_advance(now=at)


@pytest.fixture
def told():  # type: ignore[no-untyped-def]
    """The reclaims' events announced, as (reclaim, event)."""
    seen: list[tuple[int, str]] = []

    def listen(sender: object, reclaim_id: int, event: str, **kwargs: object) -> None:
        seen.append((reclaim_id, event))

    reclaim_event.connect(listen)
    yield seen
    reclaim_event.disconnect(listen)


def _leaving(portal: Kubesim, pod: GpuPod) -> bool:
    try:
        found = portal.core().read_namespaced_pod(pod.name, pod.namespace)
    except ApiException as error:
        return error.status == 404
    return found.metadata.uid != pod.uid or found.metadata.deletion_timestamp is not None


def test_the_demos_idle_embedders_are_noticed_and_an_approved_reclaim_evicts_one(
    portal: Kubesim,
    token_for,  # type: ignore[no-untyped-def]
    told,
    django_capture_on_commit_callbacks,
    settings,
) -> None:
    """As `make demo` sets it up (demo_pools turns inference's policy on): the scenario's
    embedders hold a GPU each and do nothing (kubesim's `idle` load); the serving pods work.
    Each embedder's owner is told; after the grace, one person files the prefilled request,
    another approves it, and the sweep evicts that embedder through the eviction API."""
    from django.core.management import call_command

    call_command("demo_pools")
    body = api(token_for("viewers")).get("/api/v1/pools/inference/reclaim/").json()
    assert body["metrics_error"] is None
    embedders = GpuPod.objects.live().filter(pool_label="inference", name__startswith="embedder")
    assert len(embedders) == 5
    assert sorted((c["namespace"], c["pod"], c["node"]) for c in body["candidates"]) == sorted(
        (p.namespace, p.name, p.node_name) for p in embedders
    )
    assert {(c["team"], c["contact"]) for c in body["candidates"]} == {
        ("search", "search-oncall@example.com")
    }
    policy = {**body["policy"], "grace_hours": 0}
    policy.pop("updated_at")
    admin = api(token_for("pool-admins", "paula"))
    saved = admin.put("/api/v1/pools/inference/reclaim/", policy, "application/json")
    assert saved.status_code == 200, saved.content

    now = timezone.now()
    done = _sweep(now, django_capture_on_commit_callbacks)
    assert len(done["noticed"]) == len(done["due"]) == 5  # no grace: due at once
    assert sorted(e for _, e in told) == ["due"] * 5 + ["noticed"] * 5
    target = embedders.get(node_name="a100-infer-000")
    reclaim = Reclaim.objects.get(pod_uid=target.uid)
    assert (reclaim.state, reclaim.team, reclaim.contact) == (
        "due",
        "search",
        "search-oncall@example.com",
    )
    settings.NOTIFY_EMAIL = True
    reclaim_email(event="noticed", reclaim_id=reclaim.pk)
    assert mail.outbox[-1].to == ["search-oncall@example.com"]
    assert "noticed" not in _sweep(now, django_capture_on_commit_callbacks)  # once per pod

    rita = api(token_for("requesters", "rita"))
    filed = rita.post(f"/api/v1/reclaims/{reclaim.pk}/request/", {}, "application/json")
    assert filed.status_code == 200, filed.content
    arno = api(token_for("approvers", "arno"))
    approved = arno.post(f"/api/v1/reclaims/{reclaim.pk}/approve/", {}, "application/json")
    assert approved.status_code == 200, approved.content
    done = _sweep(timezone.now(), django_capture_on_commit_callbacks)
    assert done["evicted"] == [reclaim.pk], done
    wait_for(lambda: _leaving(portal, target), timeout=60, what="the embedder to leave")
    others = Reclaim.objects.exclude(pk=reclaim.pk)
    assert set(others.values_list("state", flat=True)) == {"due"}
    actions = list(
        AuditEvent.objects.filter(reclaim=reclaim)
        .order_by("at", "id")
        .values_list("action", flat=True)
    )
    assert actions == [
        "reclaim.noticed",
        "reclaim.due",
        "reclaim.requested",
        "reclaim.approved",
        "pod.evicted",
    ]


def _notebook_as_scenario_made(portal: Kubesim) -> GpuPod:
    """The idle notebook without the annotations another test may have given it."""
    pod = _idle_pod()
    portal.core().patch_namespaced_pod(
        pod.name,
        pod.namespace,
        {
            "metadata": {
                "annotations": {"gpu-portal.io/contact": None, "gpu-portal.io/reclaim": None}
            }
        },
    )
    inventory_sync()
    return _idle_pod()


def test_a_candidate_is_noticed_once_its_grace_runs_and_an_opt_out_ends_it(
    stack: tuple[Kubesim, PrometheusServer],
    portal: Kubesim,
    token_for,  # type: ignore[no-untyped-def]
    django_capture_on_commit_callbacks,
    settings,
) -> None:
    pod = _notebook_as_scenario_made(portal)
    api(token_for("pool-admins", "paula")).put(
        "/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json"
    )
    now = timezone.now()
    prom = stack[1]
    before = prom.query_count()
    assert len(_sweep(now, django_capture_on_commit_callbacks)["noticed"]) == 1
    # The window's query, and the week's idle hours for the one new candidate.
    assert prom.queries_since(before) == 2
    reclaim = Reclaim.objects.get(pod_uid=pod.uid)
    assert reclaim.grace_until == now + timedelta(hours=POLICY["grace_hours"])
    noticed_hours = reclaim.idle_hours
    before = prom.query_count()
    assert _sweep(now + timedelta(seconds=90), django_capture_on_commit_callbacks) == {}
    assert prom.queries_since(before) == 1  # nothing new: the costly query is not sent
    reclaim.refresh_from_db()
    assert reclaim.idle_hours == pytest.approx(noticed_hours + 90 / 3600)  # seen idle since
    # An hour nobody saw: two ticks' worth at most are counted.
    assert _sweep(now + timedelta(hours=1, seconds=90), django_capture_on_commit_callbacks) == {}
    reclaim.refresh_from_db()
    tick = settings.RECLAIM_TICK_SECONDS
    assert reclaim.idle_hours == pytest.approx(noticed_hours + (90 + 2 * tick) / 3600)

    # Prometheus down past the grace: nothing decided on the metrics' absence.
    url, settings.PROMETHEUS_URL = settings.PROMETHEUS_URL, "http://127.0.0.1:9"
    past_grace = now + timedelta(hours=POLICY["grace_hours"] + 1)
    assert _sweep(past_grace, django_capture_on_commit_callbacks) == {}
    assert Reclaim.objects.get(pk=reclaim.pk).state == "noticed"
    settings.PROMETHEUS_URL = url
    assert _sweep(past_grace, django_capture_on_commit_callbacks) == {"due": [reclaim.pk]}

    portal.core().patch_namespaced_pod(
        pod.name, pod.namespace, {"metadata": {"annotations": {"gpu-portal.io/reclaim": "never"}}}
    )
    inventory_sync()
    assert _sweep(past_grace, django_capture_on_commit_callbacks) == {"opted_out": [reclaim.pk]}
    reclaim.refresh_from_db()
    assert reclaim.finished_at is not None and "never to be reclaimed" in reclaim.outcome
    # Opted out: never noticed again.
    assert _sweep(past_grace, django_capture_on_commit_callbacks) == {}
    _notebook_as_scenario_made(portal)


def test_turning_the_policy_off_cancels_the_open_reclaims(
    portal: Kubesim,
    token_for,  # type: ignore[no-untyped-def]
    django_capture_on_commit_callbacks,
) -> None:
    _notebook_as_scenario_made(portal)
    admin = api(token_for("pool-admins", "paula"))
    admin.put("/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json")
    (noticed,) = _sweep(timezone.now(), django_capture_on_commit_callbacks)["noticed"]
    off = {**POLICY, "enabled": False}
    admin.put("/api/v1/pools/mixed/reclaim/", off, content_type="application/json")
    # At once, not at the next sweep: nothing of the pool's may be approved or evicted now.
    assert Reclaim.objects.get(pk=noticed).state == "cancelled"
    event = AuditEvent.objects.get(reclaim_id=noticed, action="reclaim.cancelled")
    assert "policy was turned off" in event.message
    assert _sweep(timezone.now(), django_capture_on_commit_callbacks) == {}


def test_the_sweep_ends_what_it_sees_and_never_decides_on_missing_series(
    portal: Kubesim,
    token_for,  # type: ignore[no-untyped-def]
    django_capture_on_commit_callbacks,
) -> None:
    _notebook_as_scenario_made(portal)
    api(token_for("pool-admins", "paula")).put(
        "/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json"
    )
    now = timezone.now()

    def follow(pod: GpuPod, state: str = "due") -> Reclaim:
        return reclaim_row(
            "mixed",
            namespace=pod.namespace,
            pod=pod.name,
            uid=pod.uid,
            node=pod.node_name,
            state=state,
        )

    embedder = GpuPod.objects.live().filter(pool_label="inference", units__gt=0).first()
    busy = GpuPod.objects.live().get(node_name=BUSY_NODES[0], units__gt=0)
    ghost = running_gpu_pod(
        "mixed", uid="ghost-uid", namespace="research", name="ghost-0", node=BUSY_NODES[1]
    )
    moved, worked, unknown = follow(embedder), follow(busy), follow(ghost)
    done = _sweep(now, django_capture_on_commit_callbacks)
    assert done["cancelled"] == [moved.pk] and done["recovered"] == [worked.pk]
    assert "moved to the pool inference" in Reclaim.objects.get(pk=moved.pk).outcome
    # The ghost holds GPUs in the inventory but has no GPU series: nothing is decided.
    assert Reclaim.objects.get(pk=unknown.pk).state == "due"

    Pool.objects.filter(name="mixed").update(retired_at=now)
    done = _sweep(now, django_capture_on_commit_callbacks)
    assert unknown.pk in done["cancelled"]
    assert Reclaim.objects.get(pk=unknown.pk).outcome == "the pool mixed was retired"
