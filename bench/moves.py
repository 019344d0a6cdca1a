"""A 200-node move, training to inference: the portal (approval to all succeeded, two
worker processes) against what operators do today, a shell loop of kubectl label and
kubectl taint per node, on the same kubesim.

    .venv/bin/python -m bench.moves [--nodes 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import django_env
from tests.kubesim_process import kubesim_server
from tests.servers import redis_server

ROOT = Path(__file__).resolve().parent.parent


def count(sim, verb: str, names: set[str]) -> int:  # type: ignore[no-untyped-def]
    return sum(
        1
        for e in sim.audit_events()
        if e["verb"] == verb
        and e.get("objectRef", {}).get("name") in names
        and e.get("objectRef", {}).get("resource") == "nodes"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=200)
    args = parser.parse_args()
    kubectl = shutil.which("kubectl")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with redis_server(tmp) as redis, kubesim_server(tmp / "sim", nodes=1000, tls=True) as sim:
            env = {
                "KUBECONFIG": str(sim.kubeconfig),
                "CELERY_BROKER_URL": redis.url,
                "PATCH_BACKOFF_SECONDS": "0.05",
            }
            django_env.setup(tmp, **env)
            from django.contrib.auth.models import Group, User
            from django.utils import timezone

            from pools import workflow
            from pools.inventory import inventory_sync
            from pools.models import MoveRequest, Node, Pool

            inventory_sync()
            training = list(
                Node.objects.filter(pool__name="training")
                .order_by("name")
                .values_list("name", flat=True)
            )
            portal_nodes, loop_nodes = training[: args.nodes], training[args.nodes : 2 * args.nodes]
            requester = User.objects.create_user("rita")
            requester.groups.add(Group.objects.get(name="requesters"))
            approver = User.objects.create_user("arno")
            approver.groups.add(Group.objects.get(name="approvers"))
            move = workflow.move_request_create(
                requested_by=requester,
                node_names=portal_nodes,
                destination=Pool.objects.get(name="inference"),
                reason="benchmark",
                now=timezone.now(),
            )
            worker_env = {**os.environ, **env, "DJANGO_SETTINGS_MODULE": "portal.settings"}
            worker = subprocess.Popen(
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
                env=worker_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                time.sleep(5)  # the worker is up
                started = time.perf_counter()
                workflow.move_approve(request=move, approver=approver, now=timezone.now())
                while True:
                    move.refresh_from_db()
                    if move.state not in MoveRequest.ACTIVE_STATES:
                        break
                    time.sleep(0.1)
                portal_seconds = time.perf_counter() - started
            finally:
                worker.terminate()
                worker.wait(timeout=30)
            assert move.state == MoveRequest.State.SUCCEEDED, move.state
            portal_patches = count(sim, "patch", set(portal_nodes))
            print(
                f"portal: {len(portal_nodes)} nodes, approval to all succeeded in "
                f"{portal_seconds:.1f} s with two worker processes; "
                f"{portal_patches} PATCH requests ({portal_patches / len(portal_nodes):.2f} "
                "a node)",
                flush=True,
            )

            if kubectl is None:
                print("kubectl loop: skipped, no kubectl on this machine")
                return
            script = "\n".join(
                f"kubectl label node {n} gpu-pool=inference workload-type=inference "
                f"batch-scheduling- --overwrite >/dev/null && "
                f"kubectl taint node {n} workload-training:NoSchedule- >/dev/null && "
                f"kubectl taint node {n} workload-inference=true:NoSchedule >/dev/null"
                for n in loop_nodes
            )
            started = time.perf_counter()
            subprocess.run(
                ["bash", "-e", "-c", script],
                check=True,
                env={**os.environ, "KUBECONFIG": str(sim.kubeconfig)},
            )
            loop_seconds = time.perf_counter() - started
            loop_patches = count(sim, "patch", set(loop_nodes))
            loop_gets = count(sim, "get", set(loop_nodes))
            print(
                f"kubectl loop: {len(loop_nodes)} nodes in {loop_seconds:.1f} s; "
                f"{loop_patches} PATCH requests ({loop_patches / len(loop_nodes):.2f} a node) "
                f"and {loop_gets} GETs",
                flush=True,
            )
            print(f"speed-up: {loop_seconds / portal_seconds:.1f}x")


if __name__ == "__main__":
    main()
