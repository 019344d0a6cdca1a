"""The real control plane's costs: its start (to /readyz, then to every scenario node Ready
with kubesim as kubelet) and the memory of each process once settled.

.venv/bin/python -m bench.control_plane [--runs 3] [--scenario demo | --nodes N]

Each run starts a new control plane in a temporary directory (the binaries from the cache:
`python -m controlplane build` first) and stops it. Times are medians over the runs;
memory is each process's resident set (VmRSS) a few seconds after the nodes are Ready.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client, config

from controlplane.launch import running


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def ready_nodes(kubeconfig: Path) -> int:
    api = config.new_client_from_config(config_file=str(kubeconfig), context="admin")
    return sum(
        1
        for node in client.CoreV1Api(api).list_node().items
        if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
    )


def one_run(options: list[str], wanted: int) -> tuple[float, float, dict[str, float]]:
    with tempfile.TemporaryDirectory() as workdir:
        started = time.perf_counter()
        with running(Path(workdir) / "cp") as plane:
            api_ready = time.perf_counter() - started
            argv = [sys.executable, "-m", "kubesim", "kubelet", "--kubeconfig"]
            argv += [str(plane.kubeconfig), "--context", "kubelet", "--metrics-port", "0"]
            kubelet = subprocess.Popen([*argv, *options], stdout=subprocess.DEVNULL)
            try:
                while ready_nodes(plane.kubeconfig) < wanted:
                    time.sleep(0.5)
                nodes_ready = time.perf_counter() - started
                time.sleep(5)
                memory = {name: rss_mib(p.pid) for name, p in plane.processes.items()}
                memory["kubesim kubelet"] = rss_mib(kubelet.pid)
            finally:
                kubelet.terminate()
                kubelet.wait()
    return api_ready, nodes_ready, memory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenario", default="demo")
    parser.add_argument("--nodes", type=int, help="a generated cluster of N nodes instead")
    args = parser.parse_args()
    options = ["--nodes", str(args.nodes)] if args.nodes else ["--scenario", args.scenario]
    wanted = args.nodes or 24  # the demo's one silent node never becomes Ready
    runs = [one_run(options, wanted) for _ in range(args.runs)]
    api = statistics.median(r[0] for r in runs)
    nodes = statistics.median(r[1] for r in runs)
    print(f"{' '.join(options)}: {args.runs} runs")
    print(f"API server ready (etcd, kube-apiserver /readyz, scheduler, controllers): {api:.1f} s")
    print(f"every node Ready through kubesim's kubelets: {nodes:.1f} s (median)")
    last = runs[-1][2]
    for name, mib in last.items():
        print(f"  {name:<26} {mib:7.0f} MiB")
    print(f"  {'total':<26} {sum(last.values()):7.0f} MiB")


if __name__ == "__main__":
    main()
