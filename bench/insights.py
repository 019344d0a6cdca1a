"""Pool insights for a 1,000-node pool over 30 days with 100,000 GpuPod rows.

    .venv/bin/python -m bench.insights [--nodes 1000] [--pods 100000] [--moved 100]
                                       [--runs 5] [--profile]

A throwaway SQLite database holds the nodes (stored through the inventory's own code, as
tests/factories.py does) and the pod history: jobs of 1 to 8 GPUs spread over the 30 days,
one in ten queued for a while, one in twenty failed; `--moved` of the nodes were lent to the
pool from another one at times spread over the window (their stays say so, and every
figure counts them only from then). Each figure is the median over the
runs after a first (cold) run; Prometheus answers come from the portal's cache when warm,
so the warm figure is the database read and the computation. The advisor reads every pool
(here the big one and the four default pools); the profiles read the whole history. Each
figure is wall-clock time and the process's CPU time (SQLite runs in the process): on a
shared machine the wall clock mostly measures the wait for a core. `--profile` prints
where the cold pool insights spend their CPU time (cProfile, the top functions).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import django_env


def lend(names: list[str], now: datetime, rng: random.Random) -> None:
    """Record `names` as lent to the big pool from mixed at times over the last 30 days."""
    from pools.models import PoolStay

    PoolStay.objects.filter(node_name__in=names).delete()
    stays = []
    for name in names:
        lent = now - timedelta(seconds=rng.uniform(3600, 29 * 86400))
        stays.append(
            PoolStay(
                node_name=name,
                pool_label="mixed",
                since=now - timedelta(days=40),
                until=lent,
                earliest=True,
            )
        )
        stays.append(PoolStay(node_name=name, pool_label="big", since=lent))
    PoolStay.objects.bulk_create(stays)


def build(nodes: int, pods: int, moved: int, now: datetime) -> None:
    from pools.models import GpuPod, Pool
    from tests.factories import Group, node_and_pods, store

    Pool.objects.create(
        name="big",
        display_name="Big",
        labels={"workload-type": "big"},
        taint_key="workload-big",
        taint_value="true",
        taint_effect="NoSchedule",
    )
    names = [f"big-{i:04d}" for i in range(nodes)]
    store(node_and_pods(n, Group(n, 1, "big")) for n in names)
    rng = random.Random(7)
    lend(names[:moved], now, rng)
    start = now - timedelta(days=30)
    batch = []
    for i in range(pods):
        created = start + timedelta(seconds=rng.uniform(0, 30 * 86400 - 7200))
        wait = timedelta(seconds=rng.choice([5] * 9 + [rng.uniform(120, 7200)]))
        run = timedelta(seconds=rng.uniform(600, 6 * 3600))
        failed = rng.random() < 0.05
        finished = min(created + wait + run, now)
        batch.append(
            GpuPod(
                uid=f"uid-{i}",
                namespace=f"team-{i % 12}",
                name=f"job-{i}",
                node_name=rng.choice(names),
                pool_label="big",
                phase="Failed" if failed else "Succeeded",
                gpus=rng.choice([1, 2, 4, 8]),
                cpu_milli=8000,
                memory_bytes=64 * 2**30,
                workload_type=rng.choice(["training", "inference"]),
                created_at=created,
                scheduled_at=created + wait,
                started_at=created + wait,
                finished_at=finished,
                termination_reason=rng.choice(["OOMKilled", "Error", "Evicted"]) if failed else "",
                exit_code=(137 if failed else 0),
            )
        )
        if len(batch) == 5000:
            GpuPod.objects.bulk_create(batch)
            batch = []
    GpuPod.objects.bulk_create(batch)


Timing = tuple[float, float]  # wall seconds, CPU seconds


def timed(action) -> Timing:  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def timed_runs(runs: int, action) -> tuple[Timing, list[Timing]]:  # type: ignore[no-untyped-def]
    cold = timed(action)
    return cold, [timed(action) for _ in range(runs)]


def profile_cold(action) -> None:  # type: ignore[no-untyped-def]
    from django.core.cache import cache

    cache.clear()
    profiler = cProfile.Profile()
    profiler.runcall(action)
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(15)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--moved", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        django_env.setup(Path(tmp))
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from pools.insights import gather
        from pools.models import GpuPod, Pool

        now = datetime.now(UTC)
        began = time.perf_counter()
        build(args.nodes, args.pods, args.moved, now)
        print(
            f"built {args.nodes} nodes ({args.moved} lent during the window) and "
            f"{GpuPod.objects.count()} pods "
            f"in {time.perf_counter() - began:.1f} s ({connection.vendor})"
        )
        pool = Pool.objects.get(name="big")
        print(f"load average {os.getloadavg()[0]:.1f}")
        for label, action in (
            ("pool insights, 30 days", lambda: gather.pool_insights(pool, days=30, now=now)),
            ("advice, every pool", lambda: gather.advice(days=30, now=now)),
            ("profiles, 30 days", lambda: gather.profiles(days=30, by="namespace", now=now)),
        ):
            with CaptureQueriesContext(connection) as queries:
                cold, warm = timed_runs(args.runs, action)
            print(
                f"{label}: warm median {ms(statistics.median(w for w, _ in warm))} ms wall / "
                f"{ms(statistics.median(c for _, c in warm))} ms CPU (runs "
                f"{', '.join(ms(w) for w, _ in warm)} ms); cold {ms(cold[0])} ms wall / "
                f"{ms(cold[1])} ms CPU; {len(queries) // (args.runs + 1)} SQL queries a run"
            )
        print(f"load average {os.getloadavg()[0]:.1f}")
        if args.profile:
            profile_cold(lambda: gather.pool_insights(pool, days=30, now=now))


if __name__ == "__main__":
    main()
