"""`python -m kubesim kubelet --kubeconfig K --scenario S`: the scenario's nodes, their
kubelets and their DCGM exporter, against the API server the kubeconfig names."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import secrets
import signal
import sys
import threading
from pathlib import Path

from kubernetes import config

from kubesim.dcgm import Exporter, serve_forever_in_thread, write_targets_file
from kubesim.kubelet.agent import (
    LEASE_DURATION_SECONDS,
    LEASE_RENEW_SECONDS,
    STATUS_SECONDS,
    Heartbeats,
    Kubelet,
)
from kubesim.kubelet.operator import install_gpu_operator
from kubesim.kubelet.serve import make_server
from kubesim.scenario import Scenario, ScenarioError, generated_scenario, load_scenario


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
    kubelet.add_argument(
        "--pods-per-node",
        type=int,
        help="with --nodes: at most this many of the generated scenario's pods a node",
    )
    kubelet.add_argument(
        "--workers",
        type=int,
        default=1,
        help="register the nodes, create the scenario's pods and post pods' starts in this many "
        "threads",
    )
    beats = kubelet.add_argument_group(
        "heartbeats", "a kubelet's defaults; one process playing thousands of nodes spreads them"
    )
    beats.add_argument("--lease-renew-seconds", type=float, default=LEASE_RENEW_SECONDS)
    beats.add_argument("--lease-duration-seconds", type=int, default=LEASE_DURATION_SECONDS)
    beats.add_argument(
        "--status-seconds",
        type=float,
        default=STATUS_SECONDS,
        help="how often each node posts its Ready condition besides its Lease",
    )


def fewer_pods(scenario: Scenario, per_node: int) -> Scenario:
    """The scenario with at most `per_node` pods of each node group's (a generated cluster
    of thousands of nodes is mostly its pods to create, schedule and adopt)."""
    groups = []
    for group in scenario.groups:
        pods, left = [], per_node
        for spec in group.pods:
            if left > 0:
                pods.append(dataclasses.replace(spec, count=min(spec.count, left)))
                left -= pods[-1].count
        groups.append(dataclasses.replace(group, pods=pods))
    return dataclasses.replace(scenario, groups=groups)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="kubesim kubelet: %(message)s")
    try:
        scenario = generated_scenario(args.nodes) if args.nodes else load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"kubesim: bad scenario: {exc}", file=sys.stderr)
        return 2
    if args.pods_per_node is not None:
        if not args.nodes or args.pods_per_node < 0:
            print("kubesim: --pods-per-node takes --nodes and a count >= 0", file=sys.stderr)
            return 2
        scenario = fewer_pods(scenario, args.pods_per_node)
    if args.workers < 1 or args.lease_renew_seconds <= 0 or args.status_seconds <= 0:
        print("kubesim: --workers and the heartbeat intervals must be positive", file=sys.stderr)
        return 2
    if args.lease_duration_seconds <= args.lease_renew_seconds:
        print(
            "kubesim: --lease-duration-seconds must exceed --lease-renew-seconds", file=sys.stderr
        )
        return 2
    if not args.kubeconfig.exists():
        print(f"kubesim: no kubeconfig at {args.kubeconfig}", file=sys.stderr)
        return 2
    api = config.new_client_from_config(config_file=str(args.kubeconfig), context=args.context)
    heartbeats = Heartbeats(
        args.lease_renew_seconds, args.lease_duration_seconds, args.status_seconds
    )
    kubelet = Kubelet(api, scenario, heartbeats=heartbeats, workers=args.workers)
    kubelet.start_heartbeats()
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
    kubelet.close()
    server.shutdown()
    return 0
