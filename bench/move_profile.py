"""Where a 200-node move's CPU goes in the worker: the execution (claim, Kubernetes calls,
record) run in this one process against kubesim over TLS, with the process time each round,
and a profile of CPU time (each thread's own: the main thread's, and each node's Kubernetes
side in the pool's threads, merged). No Celery: `start_request`, then `execute_items` on
each chunk in turn, as the worker's tasks would; rounds alternate between training and
inference.

    .venv/bin/python -m bench.move_profile [--nodes 200] [--rounds 3] [--top 25] [--save FILE]

The timed rounds run without the profiler; one more round is profiled.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import django_env
from bench.moves import users
from tests.kubesim_process import kubesim_server
from tests.servers import redis_server


def one_move(
    names: list[str], destination: str, people: tuple[Any, Any], profile: Any = None
) -> tuple[float, float]:
    """Approve a move and run it here; (wall seconds, process seconds) from approval on,
    profiled from there on when a profile is given."""
    from django.utils import timezone

    from pools import moves
    from pools.models import MoveRequest, Pool
    from pools.moves.execution import run

    move = moves.move_request_create(
        requested_by=people[0],
        node_names=names,
        destination=Pool.objects.get(name=destination),
        reason="profile",
        now=timezone.now(),
    )
    wall, cpu = time.perf_counter(), time.process_time()
    if profile is not None:
        profile.enable()
    moves.move_approve(request=move, approver=people[1], now=timezone.now())
    items = run.start_request(move.pk)
    for chunk in run.chunks(move.pk, items):
        assert not run.execute_items(chunk)
    if profile is not None:
        profile.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    move.refresh_from_db()
    assert move.state == MoveRequest.State.SUCCEEDED, move.state
    return wall, cpu


class ThreadProfiles:
    """CPU profiles of the node threads (`run._attempt` wrapped, for this tool only):
    cProfile follows one thread, and the Kubernetes side runs in the pool's threads."""

    def __init__(self) -> None:
        from pools.moves.execution import run

        self.lock = threading.Lock()
        self.profiles: list[cProfile.Profile] = []
        self.on = False
        attempt = run._attempt

        def profiled(work: Any) -> Any:
            if not self.on:
                return attempt(work)
            profile = cProfile.Profile(time.thread_time)
            try:
                return profile.runcall(attempt, work)
            finally:
                with self.lock:
                    self.profiles.append(profile)

        run._attempt = profiled

    def add_to(self, stats: pstats.Stats) -> None:
        for profile in self.profiles:
            stats.add(profile)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds, not profiled")
    parser.add_argument("--top", type=int, default=25, help="profile lines shown (0: none)")
    parser.add_argument("--save", help="also write the merged profile here (pstats format)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with redis_server(tmp) as redis, kubesim_server(tmp / "sim", nodes=1000, tls=True) as sim:
            django_env.setup(tmp, KUBECONFIG=str(sim.kubeconfig), CELERY_BROKER_URL=redis.url)
            from pools.inventory import inventory_sync
            from pools.models import Node

            inventory_sync()
            names = list(
                Node.objects.filter(pool__name="training")
                .order_by("name")
                .values_list("name", flat=True)[: args.nodes]
            )
            people = users()
            one_move(names[:20], "inference", people)  # untimed: connections, imports
            one_move(names[:20], "training", people)
            timed_rounds(sim, names, people, args.rounds)
            if args.top or args.save:
                profiled_round(names, people, args.rounds, args.top, args.save)


def destination(round_: int) -> str:
    return "inference" if round_ % 2 == 0 else "training"


def timed_rounds(sim: Any, names: list[str], people: tuple[Any, Any], rounds: int) -> None:
    patches_before = sim.count("patch")
    walls, cpus = [], []
    for round_ in range(rounds):
        wall, cpu = one_move(names, destination(round_), people)
        walls.append(wall)
        cpus.append(cpu)
        print(f"round {round_ + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    patches = (sim.count("patch") - patches_before) / (rounds * len(names))
    print(
        f"{len(names)} nodes, approval to all succeeded in this process: median "
        f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU "
        f"(kubesim's apart); {patches:.2f} PATCH a node; load average "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )


def profiled_round(
    names: list[str], people: tuple[Any, Any], round_: int, top: int, save: str | None
) -> None:
    """One more round under cProfile, counting each thread's own CPU time."""
    profile = cProfile.Profile(time.thread_time)
    threads = ThreadProfiles()
    threads.on = True
    wall, cpu = one_move(names, destination(round_), people, profile)
    threads.on = False
    print(f"profiled round: {wall:.2f} s wall, {cpu:.2f} s CPU (with the profiler's own cost)")
    stats = pstats.Stats(profile)
    threads.add_to(stats)
    if save:
        stats.dump_stats(save)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    main()
