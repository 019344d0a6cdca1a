"""A 200-node move between training and inference: the portal (approval to all succeeded,
one Celery worker of two processes) against what operators do today, a sequential shell
loop of `kubectl label` and `kubectl taint` per node, on the same kubesim in the same run.
Each round moves other nodes the other way back, so both sides always have work; medians
over the rounds.

    .venv/bin/python -m bench.moves [--nodes 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import django_env
from tests.kubesim_process import kubesim_server
from tests.servers import redis_server

ROOT = Path(__file__).resolve().parent.parent
# What a node carries in each pool (the default pools): labels to set and remove, taints.
POOLS = {
    "training": ("gpu-pool=training workload-type=training batch-scheduling=enabled", ""),
    "inference": ("gpu-pool=inference workload-type=inference", "batch-scheduling-"),
}


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


def portal_round(names: list[str], destination: str, users: tuple[Any, Any]) -> float:
    from django.utils import timezone

    from pools import workflow
    from pools.models import MoveRequest, Pool

    move = workflow.move_request_create(
        requested_by=users[0],
        node_names=names,
        destination=Pool.objects.get(name=destination),
        reason="benchmark",
        now=timezone.now(),
    )
    started = time.perf_counter()
    workflow.move_approve(request=move, approver=users[1], now=timezone.now())
    while True:
        move.refresh_from_db()
        if move.state not in MoveRequest.ACTIVE_STATES:
            break
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    assert move.state == MoveRequest.State.SUCCEEDED, move.state
    return seconds


def loop_round(names: list[str], source: str, destination: str, kubeconfig: Path) -> float:
    script = kubectl_script(names, source, destination)
    started = time.perf_counter()
    subprocess.run(
        ["bash", "-e", "-c", script], check=True, env={**os.environ, "KUBECONFIG": str(kubeconfig)}
    )
    return time.perf_counter() - started


def users() -> tuple[Any, Any]:
    from django.contrib.auth.models import Group, User

    requester = User.objects.create_user("rita")
    requester.groups.add(Group.objects.get(name="requesters"))
    approver = User.objects.create_user("arno")
    approver.groups.add(Group.objects.get(name="approvers"))
    return requester, approver


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("kubectl") is None:
        sys.exit("kubectl is needed for the comparison")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with redis_server(tmp) as redis, kubesim_server(tmp / "sim", nodes=1000, tls=True) as sim:
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
            people = users()
            worker = start_worker(env)
            portal_times, loop_times = [], []
            try:
                # Untimed: the worker's two processes start and load Django and the
                # Kubernetes client on their first tasks (seconds on a loaded machine).
                portal_round(portal_nodes[:20], "inference", people)
                portal_round(portal_nodes[:20], "training", people)
                for round_ in range(args.rounds):
                    source, destination = (
                        ("training", "inference") if round_ % 2 == 0 else ("inference", "training")
                    )
                    portal_times.append(portal_round(portal_nodes, destination, people))
                    loop_times.append(loop_round(loop_nodes, source, destination, sim.kubeconfig))
                    print(
                        f"round {round_ + 1} ({source} -> {destination}): portal "
                        f"{portal_times[-1]:.2f} s, kubectl loop {loop_times[-1]:.1f} s, "
                        f"{loop_times[-1] / portal_times[-1]:.1f}x",
                        flush=True,
                    )
            finally:
                worker.terminate()
                worker.wait(timeout=30)
            report(sim, portal_nodes, loop_nodes, portal_times, loop_times, args.rounds)


def report(
    sim: Any,
    portal_nodes: list[str],
    loop_nodes: list[str],
    portal_times: list[float],
    loop_times: list[float],
    rounds: int,
) -> None:
    portal, loop = statistics.median(portal_times), statistics.median(loop_times)
    moved = len(portal_nodes) * rounds
    portal_patches = count(sim, "patch", set(portal_nodes))
    loop_patches, loop_gets = (
        count(sim, "patch", set(loop_nodes)),
        count(sim, "get", set(loop_nodes)),
    )
    print(
        f"portal: {len(portal_nodes)} nodes, approval to all succeeded, median "
        f"{portal:.2f} s over {rounds} rounds; {portal_patches / moved:.2f} PATCH a node"
    )
    print(
        f"kubectl loop: median {loop:.1f} s; {loop_patches / moved:.2f} PATCH and "
        f"{loop_gets / moved:.2f} GET a node"
    )
    print(f"speed-up (median over median): {loop / portal:.1f}x")


if __name__ == "__main__":
    main()
