"""A 200-node move between training and inference: the portal (approval to all succeeded,
one Celery worker of two processes) against what operators do today, a sequential shell
loop of `kubectl label` and `kubectl taint` per node, on the same cluster in the same run.
Each round moves other nodes the other way back, so both sides always have work; medians
over the rounds.

    .venv/bin/python -m bench.moves [--nodes 200] [--rounds 3] [--portal-only]
        [--backend kubesim | kubernetes] [--cluster-nodes 1000]

The cluster is a generated one of `--cluster-nodes` nodes: kubesim's own API server, or
(`--backend kubernetes`) the real control plane (`controlplane`) with kubesim as the
kubelets of those nodes. One Python process playing a thousand kubelets on the measured
machine renews their Leases less often than kubelets would (see `--lease-renew-seconds`).

Besides wall times it reports CPU seconds (the worker's processes, kubectl's, the API
server's: kubesim, or kube-apiserver and etcd) from /proc, so a run on a shared machine
still says what each side costs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import django_env
from controlplane.launch import Options, running
from tests.kubesim_process import kubesim_server
from tests.real_cluster import RealCluster
from tests.servers import free_port, redis_server, stop, wait_for

ROOT = Path(__file__).resolve().parent.parent
# What a node carries in each pool (the default pools): labels to set and remove, taints.
POOLS = {
    "training": ("gpu-pool=training workload-type=training batch-scheduling=enabled", ""),
    "inference": ("gpu-pool=inference workload-type=inference", "batch-scheduling-"),
}


@dataclass
class Cluster:
    """What the rounds need of a backend: the kubeconfig, its audit log (`audit_events()`),
    and the processes whose CPU each side's rounds are charged with."""

    backend: str
    kubeconfig: Path
    audit: Any
    server: dict[str, int]  # what serves the API (kubesim; kube-apiserver and etcd)
    others: dict[str, int]  # the rest of a real cluster: the controllers, the kubelets


@contextlib.contextmanager
def kubesim_cluster(workdir: Path, nodes: int) -> Iterator[Cluster]:
    with kubesim_server(workdir, nodes=nodes, tls=True) as sim:
        yield Cluster("kubesim", sim.kubeconfig, sim, {"kubesim": sim.process.pid}, {})


def _nodes_ready(core: Any, nodes: int) -> bool:
    """Every node Ready, and the node lifecycle controller's `not-ready` taint off (it
    would otherwise patch the nodes' taints while the rounds do)."""
    listed = json.loads(core.list_node(resource_version="0", _preload_content=False).data)
    ready = [
        n
        for n in listed["items"]
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n["status"].get("conditions") or []
        )
        and not any(
            t["key"] == "node.kubernetes.io/not-ready" for t in n["spec"].get("taints") or []
        )
    ]
    return len(ready) >= nodes


@contextlib.contextmanager
def kubernetes_cluster(workdir: Path, nodes: int, args: Any) -> Iterator[Cluster]:
    """The real control plane, and kubesim as the kubelets of `nodes` generated nodes."""
    from kubernetes import client, config

    options = Options(
        node_monitor_grace_seconds=args.node_monitor_grace_seconds,
        kube_api_qps=args.kube_api_qps,
        start_timeout=300,
    )
    with running(workdir / "control-plane", options=options) as plane:
        token, port, ready = secrets.token_hex(16), free_port(), workdir / "kubelet.ready"
        argv = [
            *(sys.executable, "-m", "kubesim", "kubelet", "--nodes", str(nodes)),
            *("--kubeconfig", str(plane.kubeconfig), "--context", "kubelet"),
            *("--metrics-port", str(port), "--control-token", token, "--ready-file", str(ready)),
            *("--workers", str(args.kubelet_workers)),
            *("--lease-renew-seconds", str(args.lease_renew_seconds)),
            *("--lease-duration-seconds", str(4 * args.lease_renew_seconds)),
            *("--status-seconds", str(args.status_seconds)),
        ]
        if args.pods_per_node is not None:
            argv += ["--pods-per-node", str(args.pods_per_node)]
        started = time.perf_counter()
        with (workdir / "kubelet.log").open("wb") as log:
            kubelet = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(
                lambda: ready.exists() or kubelet.poll() is not None,
                timeout=1800,
                what="the kubelet's nodes and pods",
            )
            if kubelet.poll() is not None:
                sys.exit(f"kubesim kubelet exited: {(workdir / 'kubelet.log').read_text()[-2000:]}")
            api = config.new_client_from_config(config_file=str(plane.kubeconfig), context="admin")
            core = client.CoreV1Api(api)
            wait_for(lambda: _nodes_ready(core, nodes), timeout=600, what="nodes Ready")
            print(
                f"real control plane: {nodes} nodes and their pods ready in "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
            pids = {name: p.pid for name, p in plane.processes.items()}
            yield Cluster(
                "kubernetes",
                plane.kubeconfig,
                RealCluster(plane, kubelet, f"http://127.0.0.1:{port}", token),
                {name: pids[name] for name in ("kube-apiserver", "etcd")},
                {
                    "kube-scheduler": pids["kube-scheduler"],
                    "kube-controller-manager": pids["kube-controller-manager"],
                    "kubesim kubelet": kubelet.pid,
                },
            )
        finally:
            stop(kubelet)


def count(sim: Any, verb: str, names: set[str]) -> int:
    return sum(
        1
        for e in sim.audit_events()
        if e["verb"] == verb
        and e.get("objectRef", {}).get("name") in names
        and e.get("objectRef", {}).get("resource") == "nodes"
    )


def kubectl_script(names: list[str], source: str, destination: str) -> str:
    """One `kubectl label` and one `kubectl taint` a node, as an operator would type them."""
    labels, removed = POOLS[destination]
    return "\n".join(
        f"kubectl label node {n} {labels} {removed} --overwrite >/dev/null && "
        f"kubectl taint node {n} workload-{source}:NoSchedule- "
        f"workload-{destination}=true:NoSchedule >/dev/null"
        for n in names
    )


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "--concurrency",
            "2",
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env={**os.environ, **env, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """A process and its descendants (the worker's pool processes), from /proc."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        queue += [int(child) for child in children]
    return found


def cpu_of(pids: dict[str, int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids.values())


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds the process and its live descendants have used."""
    total = 0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


# How often the requester's side looks for the move's end. Only latency: each look is one
# primary-key read of the state column (tens of microseconds), so the end is seen within
# 2 ms of the commit that records it, at about 2% of a core.
POLL_SECONDS = 0.002


def move_active(move_id: int) -> bool:
    """Whether the move is still pending, approved or executing, as committed."""
    from django.db import connection

    from pools.models import MoveRequest

    table = connection.ops.quote_name(MoveRequest._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT state FROM {table} WHERE id = %s", [move_id])  # noqa: S608
        (state,) = cursor.fetchone()
    return state in MoveRequest.ACTIVE_STATES


@dataclass
class PortalRound:
    seconds: float  # approval to all succeeded, as the requester sees it
    worker_cpu: float  # the Celery worker's processes
    approval_cpu: float  # this process: the approval itself
    server_cpu: float  # kubesim, or kube-apiserver and etcd
    others_cpu: float  # a real cluster's controllers and kubelets (0 on kubesim)
    queued: float  # approval to the worker's start of the move
    first_done: float  # approval to the first node recorded
    last_done: float  # approval to the last node recorded


def portal_round(
    names: list[str], destination: str, users: tuple[Any, Any], worker: int, cluster: Cluster
) -> PortalRound:
    from django.utils import timezone

    from pools import moves
    from pools.models import MoveRequest, Pool

    move = moves.move_request_create(
        requested_by=users[0],
        node_names=names,
        destination=Pool.objects.get(name=destination),
        reason="benchmark",
        now=timezone.now(),
    )
    worker_cpu, server, others = cpu_seconds(worker), cpu_of(cluster.server), cpu_of(cluster.others)
    started, cpu = time.perf_counter(), time.process_time()
    moves.move_approve(request=move, approver=users[1], now=timezone.now())
    cpu = time.process_time() - cpu
    while move_active(move.pk):
        time.sleep(POLL_SECONDS)
    seconds = time.perf_counter() - started
    move.refresh_from_db()
    assert move.state == MoveRequest.State.SUCCEEDED, move.state
    assert move.started_at is not None and move.decided_at is not None
    finished = sorted(
        (at - move.decided_at).total_seconds()
        for at in move.items.values_list("finished_at", flat=True)
    )
    return PortalRound(
        seconds,
        cpu_seconds(worker) - worker_cpu,
        cpu,
        cpu_of(cluster.server) - server,
        cpu_of(cluster.others) - others,
        (move.started_at - move.decided_at).total_seconds(),
        finished[0],
        finished[-1],
    )


@dataclass
class LoopRound:
    seconds: float
    cpu: float  # kubectl's and the shell's
    server_cpu: float
    others_cpu: float


def loop_round(names: list[str], source: str, destination: str, cluster: Cluster) -> LoopRound:
    script = kubectl_script(names, source, destination)
    server, others = cpu_of(cluster.server), cpu_of(cluster.others)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        ["bash", "-e", "-c", script],
        check=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    return LoopRound(seconds, cpu, cpu_of(cluster.server) - server, cpu_of(cluster.others) - others)


def users() -> tuple[Any, Any]:
    from django.contrib.auth.models import Group, User

    requester = User.objects.create_user("rita")
    requester.groups.add(Group.objects.get(name="requesters"))
    approver = User.objects.create_user("arno")
    approver.groups.add(Group.objects.get(name="approvers"))
    return requester, approver


def main() -> None:
    args = parse_args()
    if shutil.which("kubectl") is None and not args.portal_only:
        sys.exit("kubectl is needed for the comparison")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "sim").mkdir()
        cluster_of = (
            kubesim_cluster(tmp / "sim", args.cluster_nodes)
            if args.backend == "kubesim"
            else kubernetes_cluster(tmp / "sim", args.cluster_nodes, args)
        )
        with redis_server(tmp) as redis, cluster_of as sim:
            env = {
                "KUBECONFIG": str(sim.kubeconfig),
                "CELERY_BROKER_URL": redis.url,
                "PATCH_BACKOFF_SECONDS": "0.05",
            }
            django_env.setup(tmp, **env)
            from pools.inventory import inventory_sync
            from pools.models import Node

            inventory_sync()
            training = list(
                Node.objects.filter(pool__name="training")
                .order_by("name")
                .values_list("name", flat=True)
            )
            portal_nodes, loop_nodes = training[: args.nodes], training[args.nodes : 2 * args.nodes]
            assert len(loop_nodes) == args.nodes, f"only {len(training)} training nodes"
            worker = start_worker(env)
            try:
                rounds = run_rounds(sim, worker.pid, portal_nodes, loop_nodes, args)
            finally:
                worker.terminate()
                worker.wait(timeout=30)
            loop_names = set(loop_nodes)
            loop_requests = (
                count(sim.audit, "patch", loop_names),
                count(sim.audit, "get", loop_names),
            )
            report(*rounds, loop_requests, nodes=args.nodes, cluster=sim)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--portal-only", action="store_true", help="skip the kubectl loop (while iterating)"
    )
    parser.add_argument("--backend", choices=("kubesim", "kubernetes"), default="kubesim")
    parser.add_argument("--cluster-nodes", type=int, default=1000)
    real = parser.add_argument_group(
        "--backend kubernetes: one Python process plays every kubelet on the measured cores, "
        "so it renews less often than a kubelet (10 s; Lease held 4x the renewal) and the "
        "controllers allow for it"
    )
    real.add_argument("--lease-renew-seconds", type=float, default=60)
    real.add_argument("--status-seconds", type=float, default=300)
    real.add_argument("--node-monitor-grace-seconds", type=int, default=300)
    real.add_argument("--kube-api-qps", type=int, default=100, help="the controllers' rate")
    real.add_argument("--kubelet-workers", type=int, default=8)
    real.add_argument("--pods-per-node", type=int, help="default: the generated scenario's")
    return parser.parse_args()


def run_rounds(
    sim: Cluster, worker_pid: int, portal_nodes: list[str], loop_nodes: list[str], args: Any
) -> tuple[list[PortalRound], list[LoopRound], float]:
    people = users()
    # Untimed: the worker's two processes start and load Django and the Kubernetes client
    # on their first tasks (seconds on a loaded machine). A move of every node, there and
    # back, so that both processes take chunks (a 20-node move is one chunk, one process).
    portal_round(portal_nodes, "inference", people, worker_pid, sim)
    portal_round(portal_nodes, "training", people, worker_pid, sim)
    patches = count(sim.audit, "patch", set(portal_nodes))
    portal: list[PortalRound] = []
    loop: list[LoopRound] = []
    for round_ in range(args.rounds):
        source, destination = (
            ("training", "inference") if round_ % 2 == 0 else ("inference", "training")
        )
        portal.append(portal_round(portal_nodes, destination, people, worker_pid, sim))
        line = (
            f"round {round_ + 1} ({source} -> {destination}): portal {portal[-1].seconds:.2f} s "
            f"({portal[-1].worker_cpu:.2f} s worker CPU)"
        )
        if not args.portal_only:
            loop.append(loop_round(loop_nodes, source, destination, sim))
            line += (
                f", kubectl loop {loop[-1].seconds:.1f} s, "
                f"{loop[-1].seconds / portal[-1].seconds:.1f}x"
            )
        print(f"{line}; load average {os.getloadavg()[0]:.1f}", flush=True)
    per_node = (count(sim.audit, "patch", set(portal_nodes)) - patches) / (args.rounds * args.nodes)
    return portal, loop, per_node


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(
    portal: list[PortalRound],
    loop: list[LoopRound],
    patches: float,
    loop_requests: tuple[int, int],
    *,
    nodes: int,
    cluster: Cluster,
) -> None:
    server = " and ".join(cluster.server)
    others = (
        f", the controllers and kubelets {median([r.others_cpu for r in portal]):.2f} s"
        if cluster.others
        else ""
    )
    print(f"backend {cluster.backend}: CPU of the API server is {server}'s")
    seconds = median([r.seconds for r in portal])
    print(
        f"portal: {nodes} nodes, approval to all succeeded, median {seconds:.2f} s over "
        f"{len(portal)} rounds (range {min(r.seconds for r in portal):.2f}-"
        f"{max(r.seconds for r in portal):.2f} s); median CPU: worker "
        f"{median([r.worker_cpu for r in portal]):.2f} s, approval "
        f"{median([r.approval_cpu for r in portal]):.2f} s, API server "
        f"{median([r.server_cpu for r in portal]):.2f} s{others}; approval to the worker's start "
        f"{median([r.queued for r in portal]) * 1000:.0f} ms, to the first node recorded "
        f"{median([r.first_done for r in portal]) * 1000:.0f} ms, to the last "
        f"{median([r.last_done for r in portal]) * 1000:.0f} ms; {patches:.2f} PATCH a node"
    )
    if loop:
        loop_seconds = median([r.seconds for r in loop])
        loop_others = (
            f", the controllers and kubelets {median([r.others_cpu for r in loop]):.1f} s"
            if cluster.others
            else ""
        )
        print(
            f"kubectl loop: median {loop_seconds:.1f} s (range "
            f"{min(r.seconds for r in loop):.1f}-{max(r.seconds for r in loop):.1f} s); "
            f"median CPU: kubectl {median([r.cpu for r in loop]):.1f} s, API server "
            f"{median([r.server_cpu for r in loop]):.1f} s{loop_others}; "
            f"{loop_requests[0] / (len(loop) * nodes):.2f} PATCH and "
            f"{loop_requests[1] / (len(loop) * nodes):.2f} GET a node"
        )
        print(f"speed-up (median over median): {loop_seconds / seconds:.1f}x")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
