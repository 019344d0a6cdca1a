"""The inventory watcher (`manage.py watch_inventory`) as its own process, against kubesim:
changes appear without a re-list, a 410 lists again, a restarted API server is followed,
and of two watchers only one writes until the other dies."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pools.models import GpuPod, InventoryLease, Node
from tests.kubesim_process import Kubesim, _start, _wait_serving, kubesim_server
from tests.servers import free_port, stop
from tests.workers import ROOT, worker_env

pytestmark = pytest.mark.both_backends


@dataclass
class Watcher:
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def watcher(workdir: Path, name: str = "w1", **env: str) -> Iterator[Watcher]:
    log = workdir / f"watcher-{name}.log"
    process = subprocess.Popen(
        [sys.executable, "manage.py", "watch_inventory"],
        cwd=ROOT,
        env=worker_env(INVENTORY_LEASE_SECONDS="3", **env),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield Watcher(process, log)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def eventually(check: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def listed(w: Watcher) -> bool:
    return "listed pods at resourceVersion" in w.text()


def lease() -> InventoryLease:
    return InventoryLease.objects.get()


def pool_of(node: str) -> str | None:
    return Node.objects.filter(name=node).values_list("pool_label", flat=True).first()


def gpu_pod(name: str, node: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "research"},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }


@pytest.fixture
def tls_cluster(settings, tmp_path: Path) -> Iterator[Kubesim]:  # type: ignore[no-untyped-def]
    """kubesim over HTTPS: kubectl sends its token only over TLS."""
    with kubesim_server(tmp_path / "sim", tls=True) as sim:
        settings.KUBECONFIG = str(sim.kubeconfig)
        settings.KUBE_CONTEXT = ""
        yield sim


@pytest.mark.django_db(transaction=True)
def test_a_kubectl_label_and_pod_changes_reach_the_rows_without_listing_again(
    tls_cluster: Kubesim, tmp_path: Path
) -> None:
    port, token = free_port(), "watcher-metrics-token-0123456789"
    with watcher(tmp_path, METRICS_PORT=str(port), METRICS_TOKEN=token) as w:
        eventually(lambda: listed(w) and Node.objects.count() == 25, "the first list")
        subprocess.run(
            [
                *("kubectl", "--kubeconfig", str(tls_cluster.kubeconfig)),
                *("label", "node", "gpu-new-000", "gpu-pool=training"),
            ],
            check=True,
            capture_output=True,
        )
        eventually(lambda: pool_of("gpu-new-000") == "training", "the label in the row")
        # The watcher serves its own /metrics: how old the last change it wrote was.
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}
        )
        scraped = urllib.request.urlopen(request, timeout=10).read().decode()
        lag = re.search(r'portal_inventory_watch_lag_seconds\{resource="nodes"\} (\S+)', scraped)
        assert lag is not None, scraped
        assert float(lag.group(1)) >= 0
        core = tls_cluster.core()
        core.create_namespaced_pod("research", gpu_pod("fresh", "gpu-new-001"))
        eventually(lambda: GpuPod.objects.filter(name="fresh").exists(), "the new pod's row")
        eventually(
            lambda: Node.objects.get(name="gpu-new-001").gpu_allocated == 1, "the node's sum"
        )
        core.delete_namespaced_pod("fresh", "research", grace_period_seconds=0)
        eventually(
            lambda: GpuPod.objects.filter(name="fresh", deleted_at__isnull=False).exists(),
            "the deleted pod marked",
        )
        core.delete_node("gpu-new-000")
        eventually(
            lambda: Node.objects.filter(name="gpu-new-000", gone_at__isnull=False).exists(),
            "the deleted node marked gone",
        )
    # One list of each, then watches only.
    assert tls_cluster.count("list", resource="nodes") == 1
    assert tls_cluster.count("list", resource="pods") == 1


@pytest.mark.kubesim_only("answers a watch with 410 Gone on request")
@pytest.mark.django_db(transaction=True)
def test_a_410_gone_lists_that_resource_again(cluster: Kubesim, tmp_path: Path) -> None:
    # The first watch of pods meets 410 Gone, as when the history moved past the list.
    cluster.control("faults", {"fail_next": [{"status": 410, "verb": "watch", "resource": "pods"}]})
    with watcher(tmp_path) as w:
        eventually(lambda: w.text().count("listed pods at resourceVersion") == 2, "a re-list")
        cluster.core().create_namespaced_pod("research", gpu_pod("after", "gpu-new-001"))
        eventually(lambda: GpuPod.objects.filter(name="after").exists(), "the watch resumed")
    assert cluster.count("list", resource="pods") == 2
    assert cluster.count("list", resource="nodes") == 1
    assert GpuPod.objects.filter(deleted_at__isnull=True).count() == 36 + 1


@contextlib.contextmanager
def kubesim_on(workdir: Path, port: int, metrics_port: int, state: Path) -> Iterator[None]:
    process, log = _start(workdir, port, metrics_port, ["--state", str(state)])
    try:
        assert _wait_serving(workdir, process, port, metrics_port, last=True, timeout=60)
        yield
    finally:
        stop(process)  # SIGTERM: kubesim saves its state
        log.close()


@pytest.mark.django_db(transaction=True)
def test_it_follows_an_api_server_that_restarts(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workdir, state = tmp_path / "sim", tmp_path / "state.json"
    workdir.mkdir()
    port, metrics_port = free_port(), free_port()
    settings.KUBECONFIG, settings.KUBE_CONTEXT = str(workdir / "kubeconfig"), ""
    sim = Kubesim(
        f"http://127.0.0.1:{port}", "", workdir / "kubeconfig", workdir / "audit.log", None, False
    )  # type: ignore[arg-type]
    with watcher(tmp_path) as w:
        with kubesim_on(workdir, port, metrics_port, state):
            eventually(lambda: listed(w), "the first list")
        # The API server is away: the watcher keeps trying, then resumes from the
        # resourceVersion it had (the restarted server goes on from the saved one). Its lease
        # says so meanwhile: still renewed, with the trouble and its last answer's time.
        eventually(lambda: "resuming in" in w.text(), "the dropped connection noticed")
        eventually(lambda: "watching" in lease().trouble, "the trouble noted on the lease")
        last_answer = lease().heard_at
        assert last_answer is not None
        with kubesim_on(workdir, port, metrics_port, state):
            sim.core().patch_node("gpu-new-001", {"metadata": {"labels": {"gpu-pool": "mixed"}}})
            eventually(lambda: pool_of("gpu-new-001") == "mixed", "the change after the restart")
            sim.core().create_namespaced_pod("research", gpu_pod("later", "gpu-new-001"))
            eventually(lambda: GpuPod.objects.filter(name="later").exists(), "a new pod")
            eventually(lambda: lease().trouble == "", "the trouble cleared once answered")
            assert lease().heard_at > last_answer  # type: ignore[operator]
        assert w.text().count("listed pods at resourceVersion") == 1  # resumed, not re-listed
    assert Node.objects.filter(gone_at__isnull=True).count() == 25


@pytest.mark.django_db(transaction=True)
def test_one_watcher_writes_and_the_other_takes_over_when_it_dies(
    cluster: Kubesim, tmp_path: Path
) -> None:
    with watcher(tmp_path, "first") as first:
        eventually(lambda: listed(first), "the first watcher's list")
        with watcher(tmp_path, "second") as second:
            eventually(lambda: "waiting for the inventory lease" in second.text(), "a waiter")
            holder = InventoryLease.objects.get().holder
            assert holder == f"watcher:{os.uname().nodename}:{first.process.pid}"
            os.killpg(first.process.pid, signal.SIGKILL)  # no release: the lease must expire
            first.process.wait(timeout=10)
            eventually(lambda: listed(second), "the take-over", timeout=30)
            assert InventoryLease.objects.get().holder.endswith(f":{second.process.pid}")
            cluster.core().patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "x"}}})
            eventually(lambda: pool_of("gpu-new-000") == "x", "the second watcher's write")
    # The first only listed once, while it led; the second listed after taking over.
    assert cluster.count("list", resource="nodes") == 2


@pytest.mark.django_db(transaction=True)
def test_the_periodic_sync_asks_the_watcher_to_list_again(cluster: Kubesim, tmp_path: Path) -> None:
    from pools import tasks

    with watcher(tmp_path) as w:
        eventually(lambda: listed(w), "the first list")
        answer = tasks.sync_inventory()
        holder = f"watcher:{os.uname().nodename}:{w.process.pid}"
        assert answer == f"asked the inventory watcher {holder} to list again"
        eventually(lambda: w.text().count("listed pods at resourceVersion") == 2, "the re-list")
        # Both streams ended at once for it: on a quiet cluster (a real one's nodes change
        # once a minute or less) a stream would otherwise carry on until its timeout.
        assert "a full sync asked for a re-list; watch streams ended for it: nodes, pods" in (
            w.text()
        )
        eventually(lambda: w.text().count("GPU nodes at resourceVersion") == 2, "nodes re-listed")
        assert "resuming in" not in w.text()  # ended on purpose, not a failure
    assert cluster.count("list", resource="nodes") == 2
