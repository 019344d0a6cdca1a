"""The inventory watcher's initial sync at scale: 15,000 nodes (120,000 GPUs) and about
114,000 pods, from the process's start to every row written, and the watcher's peak RSS
(and the process reading pod pages beside it, INVENTORY_READ_PROCESSES).

.venv/bin/python -m bench.watch_sync [--nodes 15000] [--runs 3] [--profile]

Each run starts `manage.py watch_inventory` as its own process against a fresh database
(SQLite, or BENCH_DATABASE_URL) and reads its log: when it took the lease, listed the
nodes, listed and wrote the pods, and wrote the node rows. Peak RSS is the process's
VmHWM from /proc; CPU time is the watcher's (every thread) and kubesim's over the run,
from /proc, so a run on a shared machine still says what the sync itself cost.

`--profile` runs the same steps in this process instead, one after the other (list the
nodes, write their rows, list and write the pods, write the nodes' pod figures) under
cProfile on CPU time, and prints the costliest functions.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tests.kubesim_process import ROOT, kubesim_server

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
STEPS = {
    "lease": "holds the inventory lease",
    "nodes listed": "GPU nodes at resourceVersion",
    "pods listed and written": "listed pods at resourceVersion",
    "node rows written": "wrote ",
}


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User and system CPU time of a process, every thread, from /proc; with `children`,
    also its children's: those it has reaped (cutime, cstime) and those still running (the
    processes that read the pod pages)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    seconds = ticks / os.sysconf("SC_CLK_TCK")
    if children:
        seconds += sum(cpu_seconds(child) for child in child_pids(pid))
    return seconds


def child_pids(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(n) for n in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def children_peak_mib(pid: int) -> float:
    """The largest peak RSS among the process's children now (a reader of pod pages)."""
    peaks = [0.0]
    for child in child_pids(pid):
        try:
            peaks.append(peak_mib(child))
        except OSError:
            continue
    return max(peaks)


def stamps(log: str) -> dict[str, float]:
    """When each step ended, from the log's timestamps; the node rows are written by the
    first flush after the pods were listed."""
    found: dict[str, float] = {}
    for line in log.splitlines():
        match = STAMP.match(line)
        if not match:
            continue
        when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for step, marker in STEPS.items():
            after_pods = step != "node rows written" or "pods listed and written" in found
            if marker in line and step not in found and after_pods:
                found[step] = when
    return found


@dataclass
class Run:
    seconds: float  # from the lease to every row written
    peak_mib: float
    reader_peak_mib: float  # the largest of the processes reading pod pages beside it
    watcher_cpu: float  # seconds, from the lease (sampled when its log line appears), with
    # its readers' (INVENTORY_READ_PROCESSES)
    kubesim_cpu: float  # seconds, over the same span
    start_cpu: float  # the watcher's CPU seconds before the lease (Django, the client)
    found: dict[str, float]


def _environment(database: str, kubeconfig: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "benchmark-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        "DATABASE_URL": database,
        "KUBECONFIG": str(kubeconfig),
    }


def one_run(workdir: Path, kubeconfig: Path, index: int, kubesim_pid: int) -> Run:
    database = os.environ.get("BENCH_DATABASE_URL", f"sqlite:///{workdir / f'run{index}.db'}")
    env = _environment(database, kubeconfig)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    log_path = workdir / f"watcher{index}.log"
    sim_cpu = cpu_seconds(kubesim_pid)
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "watch_inventory"],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
    )
    at_lease: float | None = None
    reader_peak = 0.0
    try:
        while "node rows written" not in (found := stamps(log_path.read_text())):
            if process.poll() is not None or time.time() - started > 900:
                raise RuntimeError(log_path.read_text()[-3000:])
            if at_lease is None and "lease" in found:
                at_lease = cpu_seconds(process.pid, children=True)
                sim_cpu = cpu_seconds(kubesim_pid)
            reader_peak = max(reader_peak, children_peak_mib(process.pid))
            time.sleep(0.2)
        peak, cpu = peak_mib(process.pid), cpu_seconds(process.pid, children=True)
        sim_cpu = cpu_seconds(kubesim_pid) - sim_cpu
        at_lease = at_lease if at_lease is not None else 0.0
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    text = log_path.read_text()
    print(text[-1500:] if os.environ.get("BENCH_VERBOSE") else "", end="", flush=True)
    found = stamps(text)
    seconds = found["node rows written"] - found["lease"]
    return Run(
        seconds, peak, reader_peak, cpu - at_lease, sim_cpu, at_lease, {"start": started, **found}
    )


def profile_in_process(workdir: Path, kubeconfig: Path) -> None:
    """The watcher's initial sync in this process, step by step, under cProfile."""
    import cProfile
    import pstats
    import threading

    from bench import django_env

    django_env.setup(workdir, KUBECONFIG=str(kubeconfig))
    from django.utils import timezone

    from pools.inventory.watch import WatchState, flush, nodes_relist, pods_relist
    from pools.kube.nodes import core_api

    core_api()
    state, leading = WatchState(), threading.Event()
    leading.set()
    profiler = cProfile.Profile(time.process_time)  # CPU: the machine may be shared
    for step, run in (
        ("nodes listed", lambda: nodes_relist(state)),
        ("node rows written", lambda: flush(state.take(), timezone.now())),
        ("pods listed and written", lambda: pods_relist(state, leading)),
        ("the nodes' pod figures written", lambda: flush(state.take(), timezone.now())),
    ):
        wall, cpu = time.perf_counter(), time.process_time()
        profiler.runcall(run)
        print(
            f"{step}: {time.perf_counter() - wall:.2f} s wall, "
            f"{time.process_time() - cpu:.2f} s CPU",
            flush=True,
        )
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(50)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(35)


def report(index: int, run: Run) -> None:
    found = run.found
    steps = ", ".join(
        f"{step} +{found[step] - found['lease']:.1f}s" for step in STEPS if step in found
    )
    print(
        f"run {index + 1}: {run.seconds:.1f} s from the lease to every row "
        f"(process start to lease {found['lease'] - found['start']:.1f} s); {steps}; "
        f"peak RSS {run.peak_mib:.0f} MiB "
        f"(+ {run.reader_peak_mib:.0f} MiB the largest page reader); "
        f"CPU from the lease: watcher and its readers {run.watcher_cpu:.1f} s "
        f"(+{run.start_cpu:.1f} s before it), kubesim {run.kubesim_cpu:.1f} s; "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=15000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="one in-process run under cProfile")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with kubesim_server(tmp / "sim", nodes=args.nodes, start_timeout=900) as sim:
            if args.profile:
                profile_in_process(tmp, sim.kubeconfig)
                return
            runs = []
            for index in range(args.runs):
                runs.append(one_run(tmp, sim.kubeconfig, index, sim.process.pid))
                report(index, runs[-1])
            print(
                f"initial sync at {args.nodes} nodes: median "
                f"{statistics.median(r.seconds for r in runs):.1f} s, CPU median "
                f"{statistics.median(r.watcher_cpu for r in runs):.1f} s (watcher and readers) + "
                f"{statistics.median(r.kubesim_cpu for r in runs):.1f} s (kubesim), "
                f"peak RSS median {statistics.median(r.peak_mib for r in runs):.0f} MiB "
                f"(max {max(r.peak_mib for r in runs):.0f}) + the largest reader "
                f"{max(r.reader_peak_mib for r in runs):.0f} MiB"
            )


if __name__ == "__main__":
    main()
