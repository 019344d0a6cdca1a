"""The inventory watcher's initial sync at scale: 15,000 nodes (120,000 GPUs) and about
114,000 pods, from the process's start to every row written, and the watcher's peak RSS.

.venv/bin/python -m bench.watch_sync [--nodes 15000] [--runs 3]

Each run starts `manage.py watch_inventory` as its own process against a fresh database
(SQLite, or BENCH_DATABASE_URL) and reads its log: when it took the lease, listed the
nodes, listed and wrote the pods, and wrote the node rows. Peak RSS is the process's
VmHWM from /proc.
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


def one_run(workdir: Path, kubeconfig: Path, index: int) -> tuple[float, float, dict[str, float]]:
    database = os.environ.get("BENCH_DATABASE_URL", f"sqlite:///{workdir / f'run{index}.db'}")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "benchmark-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        "DATABASE_URL": database,
        "KUBECONFIG": str(kubeconfig),
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    log_path = workdir / f"watcher{index}.log"
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "watch_inventory"],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        while "node rows written" not in stamps(log_path.read_text()):
            if process.poll() is not None or time.time() - started > 900:
                raise RuntimeError(log_path.read_text()[-3000:])
            time.sleep(0.2)
        peak = peak_mib(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    text = log_path.read_text()
    print(text[-1500:] if os.environ.get("BENCH_VERBOSE") else "", end="", flush=True)
    found = stamps(text)
    return found["node rows written"] - found["lease"], peak, {"start": started, **found}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=15000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with kubesim_server(tmp / "sim", nodes=args.nodes, start_timeout=900) as sim:
            times, peaks = [], []
            for index in range(args.runs):
                seconds, peak, found = one_run(tmp, sim.kubeconfig, index)
                times.append(seconds)
                peaks.append(peak)
                steps = ", ".join(
                    f"{step} +{found[step] - found['lease']:.1f}s"
                    for step in STEPS
                    if step in found
                )
                print(
                    f"run {index + 1}: {seconds:.1f} s from the lease to every row "
                    f"(process start to lease {found['lease'] - found['start']:.1f} s); "
                    f"{steps}; peak RSS {peak:.0f} MiB",
                    flush=True,
                )
            print(
                f"initial sync at {args.nodes} nodes: median {statistics.median(times):.1f} s, "
                f"peak RSS median {statistics.median(peaks):.0f} MiB (max {max(peaks):.0f})"
            )


if __name__ == "__main__":
    main()
