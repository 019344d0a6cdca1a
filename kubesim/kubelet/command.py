"""`python -m kubesim kubelet --kubeconfig K --scenario S`: the scenario's nodes, their
kubelets and their DCGM exporter, against the API server the kubeconfig names."""

from __future__ import annotations

import argparse
import logging
import secrets
import signal
import sys
import threading
from pathlib import Path

from kubernetes import config

from kubesim.dcgm import Exporter, serve_forever_in_thread, write_targets_file
from kubesim.kubelet.agent import Kubelet
from kubesim.kubelet.operator import install_gpu_operator
from kubesim.kubelet.serve import make_server
from kubesim.scenario import ScenarioError, generated_scenario, load_scenario


def add_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    kubelet = sub.add_parser("kubelet", help="play the kubelets of a scenario's nodes")
    kubelet.add_argument("--kubeconfig", type=Path, required=True)
    kubelet.add_argument("--context", help="the kubeconfig context (default: its current one)")
    kubelet.add_argument("--scenario", default="demo")
    kubelet.add_argument("--nodes", type=int, help="generate N nodes instead of a scenario")
    kubelet.add_argument("--host", default="127.0.0.1")
    kubelet.add_argument("--metrics-port", type=int, default=9400)
    kubelet.add_argument("--control-token", help="bearer token of the control endpoints")
    kubelet.add_argument("--exporter-targets-file", type=Path)
    kubelet.add_argument(
        "--ready-file", type=Path, help="written once the nodes are registered and pods seeded"
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="kubesim kubelet: %(message)s")
    try:
        scenario = generated_scenario(args.nodes) if args.nodes else load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"kubesim: bad scenario: {exc}", file=sys.stderr)
        return 2
    if not args.kubeconfig.exists():
        print(f"kubesim: no kubeconfig at {args.kubeconfig}", file=sys.stderr)
        return 2
    api = config.new_client_from_config(config_file=str(args.kubeconfig), context=args.context)
    kubelet = Kubelet(api, scenario)
    kubelet.register()
    install_gpu_operator(api, kubelet)
    kubelet.run()
    kubelet.seed_pods()
    exporter = Exporter(kubelet.mirror)  # type: ignore[arg-type]
    token = args.control_token or secrets.token_urlsafe(24)
    server = make_server(kubelet, exporter, args.host, args.metrics_port, token)
    serve_forever_in_thread(server)
    address = f"{args.host}:{server.server_address[1]}"
    if args.exporter_targets_file:
        write_targets_file(args.exporter_targets_file, sorted(kubelet.nodes), address)
    print(f"kubesim kubelet: {len(kubelet.nodes)} nodes registered at {api.configuration.host}")
    print(f"kubesim kubelet: dcgm-exporter on http://{address}/metrics", flush=True)
    if args.ready_file:
        args.ready_file.write_text(address)
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    stopped.wait()
    kubelet.stop.set()
    server.shutdown()
    return 0
