"""The GPU-fault drill against kubesim and a Prometheus scraping its DCGM exporter: GPU 0 of
a training node reports XID 79 for the hold; the portal's node figures must show it; the
drill records whether the jobs on the node moved off it and whether the pool's jobs wait;
the XID is cleared at the end, even when a step fails (the beat retries the restore)."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from pools import drills
from pools.common.errors import InvalidInput
from pools.inventory import inventory_sync
from pools.metrics.dcgm import node_gpus
from pools.models import AuditEvent, Drill, Node, Pool
from tests.edges.metrics.test_dashboard import scraped
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, free_port, prometheus_server, wait_for

pytestmark = pytest.mark.django_db
NODE = "a100-train-001"
XID_QUERY = f'DCGM_FI_DEV_XID_ERRORS{{Hostname="{NODE}",gpu="0"}}'


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim")) as sim:
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(
            # Two seconds to answer a scrape: a failed one marks every series stale, and a
            # loaded machine can stall kubesim past one.
            tmp_path_factory.mktemp("prom"),
            scrape_targets=[target],
            rules=False,
            scrape_interval="2s",
        ) as prom:
            wait_for(lambda: scraped(prom, XID_QUERY, 0), timeout=30, what="a first scrape")
            yield sim, prom


@pytest.fixture
def portal(stack: tuple[Kubesim, PrometheusServer], settings) -> Kubesim:  # type: ignore[no-untyped-def]
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    settings.PATCH_BACKOFF_SECONDS = 0.01
    inventory_sync()
    return sim


def exporter_xid(sim: Kubesim, node: str = NODE, gpu: int = 0) -> int:
    text = urllib.request.urlopen(f"{sim.metrics_url}/metrics", timeout=10).read().decode()
    pattern = rf'^DCGM_FI_DEV_XID_ERRORS\{{gpu="{gpu}",[^}}]*Hostname="{node}"[^}}]*\}} (\d+)'
    match = re.search(pattern, text, re.MULTILINE)
    assert match is not None, f"no XID series for {node} GPU {gpu}"
    return int(match.group(1))


def start(node: str = NODE, hold: int = 60) -> Drill:
    return drills.drill_start(
        pool=Pool.objects.get(name="training"),
        kind=Drill.Kind.GPU_FAULT,
        node_name=node,
        hold_seconds=hold,
        user=user_in("pool-admins", "fault-admin"),
        now=timezone.now(),
    )


def test_the_portal_flags_the_fault_the_jobs_stay_and_the_fault_is_cleared(
    portal: Kubesim, stack: tuple[Kubesim, PrometheusServer]
) -> None:
    _, prom = stack
    on_node = Node.objects.get(name=NODE).pods
    # The jobs that should leave a faulty node: not the DaemonSet pods every node runs.
    pods = sorted(
        f"{p['namespace']}/{p['name']}" for p in on_node if p.get("owner_kind") != "DaemonSet"
    )
    assert pods and len(pods) < len(on_node)
    drill = start()
    begun = drills.drill_begin(drill.pk, now=timezone.now())
    assert begun is not None and begun.state == Drill.State.RUNNING
    assert exporter_xid(portal) == 79
    wait_for(lambda: scraped(prom, XID_QUERY, 79), timeout=30, what="the XID scraped")

    done = drills.drill_finish(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.FAILED, done.checks
    checks = {c["name"]: c for c in done.checks}
    assert {n: c["status"] for n, c in checks.items()} == {
        "flagged": "pass",
        "jobs_moved": "fail",  # nothing on the simulated cluster reacts to an XID
        "room": "pass",
        "restored": "pass",
    }
    assert "XID 79" in checks["flagged"]["detail"]
    assert all(p in checks["jobs_moved"]["detail"] for p in pods)
    assert done.observed["pods_before"] == done.observed["pods_still"] == pods
    assert exporter_xid(portal) == 0  # cleared on the cluster
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["drill.started", "drill.gpu_fault", "drill.finished"]


def test_jobs_taken_off_the_faulty_node_pass_the_drill(
    portal: Kubesim, stack: tuple[Kubesim, PrometheusServer]
) -> None:
    _, prom = stack
    drill = start()
    drills.drill_begin(drill.pk, now=timezone.now())
    wait_for(lambda: scraped(prom, XID_QUERY, 79), timeout=30, what="the XID scraped")
    # What a health check reacting to a fatal XID does: cordon, and take the pods off.
    core = portal.core()
    core.patch_node(NODE, {"spec": {"unschedulable": True}})
    for pod in Node.objects.get(name=NODE).pods:
        core.delete_namespaced_pod(pod["name"], pod["namespace"], grace_period_seconds=0)
    # The GPU's series change their pod labels: the check reads what Prometheus has after.
    wait_for(lambda: shown_xid(NODE) == 79, timeout=30, what="the XID without the pods")
    try:
        done = drills.drill_finish(drill.pk, now=timezone.now())
        assert done is not None
        checks = {c["name"]: c["status"] for c in done.checks}
        assert checks["jobs_moved"] == "pass" and checks["flagged"] == "pass", done.checks
        assert done.observed["pods_still"] == []
    finally:
        core.patch_node(NODE, {"spec": {"unschedulable": None}})
    assert exporter_xid(portal) == 0


def shown_xid(node: str, gpu: int = 0) -> int | None:
    rows, _ = node_gpus(node)
    return next((row.xid for row in rows if row.index == str(gpu)), None)


def test_a_gpu_without_series_is_unknown_not_a_missed_fault(portal: Kubesim) -> None:
    node = "a100-train-003"
    drill = start(node=node)
    drills.drill_begin(drill.pk, now=timezone.now())
    portal.control("exporter", {"node": node, "enabled": False})
    try:
        wait_for(lambda: shown_xid(node) is None, timeout=30, what="the node's series stale")
        done = drills.drill_finish(drill.pk, now=timezone.now())
    finally:
        portal.control("exporter", {"node": node, "enabled": True})
    assert done is not None
    flagged = next(c for c in done.checks if c["name"] == "flagged")
    assert flagged["status"] == "unknown", flagged
    assert flagged["detail"].endswith(f"no series for GPU 0 of {node} at the end of the hold")
    assert exporter_xid(portal, node) == 0


def test_a_restore_that_fails_is_retried_by_the_beat(
    portal: Kubesim, settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    drill = start(node="a100-train-002")
    drills.drill_begin(drill.pk, now=timezone.now())
    assert exporter_xid(portal, "a100-train-002") == 79
    # The API server becomes unreachable for the portal before the drill's end.
    unreachable = tmp_path / "kubeconfig"
    unreachable.write_text(
        re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{free_port()}", portal.kubeconfig.read_text())
    )
    settings.KUBECONFIG = str(unreachable)
    stuck = drills.drill_finish(drill.pk, now=timezone.now())
    assert stuck is not None and stuck.state == Drill.State.RUNNING
    assert stuck.finished_at is None and "could not restore" in stuck.error
    assert exporter_xid(portal, "a100-train-002") == 79
    assert AuditEvent.objects.filter(action="drill.restore_failed").count() == 1

    settings.KUBECONFIG = str(portal.kubeconfig)  # reachable again
    assert drills.drills_end_overdue(now=drill.ends_at + timedelta(seconds=1)) == [drill.pk]
    assert exporter_xid(portal, "a100-train-002") == 0
    done = Drill.objects.get(pk=drill.pk)
    assert done.state in (Drill.State.PASSED, Drill.State.FAILED) and done.error == ""
    assert {c["name"]: c["status"] for c in done.checks}["restored"] == "pass"


def test_a_gpu_fault_needs_a_node_of_the_pool(portal: Kubesim) -> None:
    with pytest.raises(InvalidInput) as bad:
        start(node="a100-infer-000", hold=5)
    assert set(bad.value.fields) == {"node", "hold_seconds"}
    assert "not a node of pool training" in bad.value.fields["node"]
    assert bad.value.fields["hold_seconds"] == "Hold 60 to 3600 seconds."  # a scrape or more
    assert not Drill.objects.exists() and not AuditEvent.objects.exists()
