"""kubesim's own costs at the size a later task needs: 15,000 nodes and 114,000 pods.

.venv/bin/python -m bench.kubesim_scale [--nodes 15000]

In process (no HTTP): seeding time and memory, a disruption budget over the largest
namespace (its status sync, and evictions under it), and graceful termination of many pods
(one clock timer each, reaped by one thread).
"""

from __future__ import annotations

import argparse
import gc
import resource
import time

from kubesim.cluster import Cluster
from kubesim.scenario import generated_scenario
from kubesim.seeding import seed
from kubesim.termination import DeleteOptions


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=15_000)
    parser.add_argument("--terminate", type=int, default=10_000)
    args = parser.parse_args()

    started = time.perf_counter()
    cluster = Cluster()
    seed(cluster, generated_scenario(args.nodes))
    gc.freeze()  # as `python -m kubesim serve` does after seeding
    store = cluster.store
    pods = len(store.objects["pods"])
    nodes, took = len(store.objects["nodes"]), time.perf_counter() - started
    print(f"seeded {nodes} nodes, {pods} pods in {took:.1f} s")
    print(f"max RSS after seeding: {rss_mib():.0f} MiB")
    time_budget(cluster, "team-training")
    time_graceful_deletes(cluster, "team-inference", args.terminate)
    print(
        f"max RSS at the end: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )


def time_budget(cluster: Cluster, namespace: str) -> None:
    """A budget over the namespace's workers: its first status sync, then evictions."""
    store = cluster.store
    in_namespace = len(cluster.pods_in(namespace))
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "workers", "namespace": namespace},
        "spec": {"minAvailable": 10, "selector": {"matchLabels": {"app": "training-worker"}}},
        "status": {},
    }
    started = time.perf_counter()
    with store.lock:
        store.create("poddisruptionbudgets", pdb)
        cluster.settle()
    status = store.get("poddisruptionbudgets", namespace, "workers").obj["status"]
    took = (time.perf_counter() - started) * 1000
    print(
        f"budget over {in_namespace} pods: status synced in {took:.0f} ms "
        f"(currentHealthy {status['currentHealthy']})"
    )
    victims = sorted(e.obj["metadata"]["name"] for e in cluster.pods_in(namespace))[:8]
    started = time.perf_counter()
    for name in victims:
        eviction = {"metadata": {"name": name, "namespace": namespace}}
        cluster.evict(namespace, name, eviction)
    per = (time.perf_counter() - started) / len(victims) * 1000
    print(
        f"eviction under that budget (condition, graceful delete, budget sync): {per:.0f} ms each"
    )


def time_graceful_deletes(cluster: Cluster, namespace: str, count: int) -> None:
    """`count` of the namespace's pods deleted (a timer each), then their grace periods end."""
    names = [
        (e.obj["metadata"]["namespace"], e.obj["metadata"]["name"])
        for e in cluster.pods_in(namespace)[:count]
    ]
    started = time.perf_counter()
    for ns, name in names:
        cluster.delete("pods", ns, name, DeleteOptions())
    deleting = time.perf_counter() - started
    print(f"{len(names)} graceful deletes: {deleting:.1f} s ({len(cluster.timers)} timers pending)")
    started = time.perf_counter()
    cluster.store.clock.advance(30)
    fired = cluster.timers.run_due()
    print(f"grace periods end: {fired} pods reaped in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
