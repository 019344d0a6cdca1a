"""`python -m kubesim serve ...`: the simulator from the command line."""

from __future__ import annotations

import argparse
import base64
import gc
import re
import secrets
import signal
import ssl
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import yaml

from kubesim import backfill, persistence
from kubesim.churn import Churn
from kubesim.clock import Clock, parse_rfc3339
from kubesim.cluster import Cluster
from kubesim.dcgm import (
    Exporter,
    make_exporter_server,
    serve_forever_in_thread,
    write_targets_file,
)
from kubesim.faults import Faults
from kubesim.kubelet import command as kubelet_command
from kubesim.mig_manager import DEFAULT_DELAY, MigManager
from kubesim.rbac import Rbac, RbacFileError
from kubesim.scenario import Scenario, ScenarioError, generated_scenario, load_scenario
from kubesim.seeding import seed
from kubesim.server import ApiServer, Server, User, make_server
from kubesim.store import Store
from kubesim.tls import make_certificates
from kubesim.workload_runner import WorkloadRunner
from kubesim.workload_scenarios import WORKLOADS


def rfc3339_seconds(text: str) -> float:
    """Seconds since the epoch of a UTC time written as 2026-06-01T12:00:00Z."""
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a UTC time like 2026-06-01T12:00:00Z")
    try:
        return parse_rfc3339(text)
    except ValueError:  # February 30th
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a UTC time like 2026-06-01T12:00:00Z"
        ) from None


def write_kubeconfig(
    path: Path,
    server_url: str,
    admin_token: str,
    readonly_token: str,
    ca: Path | None,
    service_accounts: dict[str, str] | None = None,
) -> None:
    """Contexts `kubesim` (admin), `kubesim-readonly`, and one per --rbac service account,
    named after its user (system:serviceaccount:NAMESPACE:NAME)."""
    cluster: dict[str, object] = {"server": server_url}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    users = [
        {"name": "kubesim-admin", "user": {"token": admin_token}},
        {"name": "kubesim-viewer", "user": {"token": readonly_token}},
    ]
    contexts = [
        {"name": "kubesim", "context": {"cluster": "kubesim", "user": "kubesim-admin"}},
        {"name": "kubesim-readonly", "context": {"cluster": "kubesim", "user": "kubesim-viewer"}},
    ]
    for user, token in (service_accounts or {}).items():
        users.append({"name": user, "user": {"token": token}})
        contexts.append({"name": user, "context": {"cluster": "kubesim", "user": user}})
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubesim", "cluster": cluster}],
        "users": users,
        "contexts": contexts,
        "current-context": "kubesim",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)  # appears whole: whoever waits for the file reads a complete one


def add_workload_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--workload",
        choices=sorted(WORKLOADS),
        help="run a workload model: jobs arrive as pods, queue, run and end "
        "(kubesim/workload_scenarios.py)",
    )
    serve.add_argument("--workload-seed", type=int, default=1, help="the same seed, the same jobs")
    serve.add_argument(
        "--history-days",
        type=float,
        default=0.0,
        help="start with the workload already run since the start of the UTC day this many "
        "days ago (the clock replays it)",
    )
    serve.add_argument(
        "--retention-days",
        type=float,
        default=7.0,
        help="how long finished pods stay as objects (ttlSecondsAfterFinished)",
    )
    serve.add_argument(
        "--history-openmetrics",
        type=Path,
        help="write the history's DCGM samples into DIR, one OpenMetrics file a metric (for "
        "promtool tsdb create-blocks-from openmetrics), before serving",
    )
    serve.add_argument("--history-step", type=int, default=300, help="seconds between samples")
    serve.add_argument(
        "--history-labels",
        default="job=dcgm-exporter",
        help="the labels the scrape adds to every series, as k=v,k=v (job, instance, the "
        "exporter pod's namespace/pod/container)",
    )


def start_workload(cluster: Cluster, args: argparse.Namespace) -> WorkloadRunner | None:
    if not args.workload:
        return None
    runner = WorkloadRunner(
        cluster,
        WORKLOADS[args.workload],
        seed=args.workload_seed,
        retention=args.retention_days * 86400,
    )
    runner.start(cluster.store.clock.now())
    return runner


def replay_history(
    cluster: Cluster,
    runner: WorkloadRunner,
    exporter: Exporter,
    args: argparse.Namespace,
    history: float,
    start: float,
) -> None:
    """Run the workload's past up to `start` (the clock's start: now, or --clock-start),
    then write its DCGM samples if asked."""
    started = time.monotonic()
    begin = cluster.store.clock.now()
    # Without --clock-start, up to the real time once the replay is done (it takes seconds).
    until = time.time() if args.clock_start is None else start
    cluster.timers.run_until(until)
    cluster.store.clock.set_now(until)
    end = cluster.store.clock.now()
    print(
        f"kubesim: {history / 86400:g} days of workload history: {len(runner.records)} pods "
        f"in {time.monotonic() - started:.1f} s",
        flush=True,
    )
    if args.history_openmetrics is None:
        return
    labels = dict(item.split("=", 1) for item in args.history_labels.split(",") if "=" in item)
    taken = backfill.snapshot(
        runner, exporter, start=begin, end=end, step=args.history_step, target_labels=labels
    )
    directory = args.history_openmetrics
    for stale in (backfill.COMPLETE, *backfill.FILES):
        (directory / stale).unlink(missing_ok=True)

    def write() -> None:
        began = time.monotonic()
        written = backfill.write_files(directory, taken)
        print(
            f"kubesim: {sum(written.values())} DCGM samples of the history written to "
            f"{directory}/ in {time.monotonic() - began:.1f} s",
            flush=True,
        )

    # The API serves meanwhile: whoever backfills waits for the `complete` file.
    threading.Thread(target=write, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    args = command_line().parse_args(argv)
    if args.command == "kubelet":
        return kubelet_command.run(args)
    return serve(args)


def command_line() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubesim")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the API server and the DCGM exporter")
    # Added in the order --help lists them.
    add_server_options(serve)
    add_exporter_options(serve)
    add_access_options(serve)
    add_state_and_clock_options(serve)
    add_workload_options(serve)
    serve.add_argument(
        "--churn",
        type=float,
        default=0.0,
        help="pod events a second: a workload pod is deleted and replaced on its node, "
        "two events each time (a busy cluster's traffic, for benchmarks)",
    )
    kubelet_command.add_command(sub)
    return parser


def add_server_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--scenario", default="demo", help="a name under kubesim/scenarios or a file"
    )
    serve.add_argument("--nodes", type=int, help="generate N nodes instead of a scenario")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=6443)
    serve.add_argument("--metrics-port", type=int, default=9400)
    serve.add_argument("--kubeconfig", type=Path, default=Path("kubesim.kubeconfig"))
    serve.add_argument("--server-url", help="the URL written into the kubeconfig")
    serve.add_argument("--audit-log", type=Path)
    serve.add_argument("--tls", action="store_true", help="serve HTTPS with a generated CA")
    serve.add_argument("--token", help="the admin bearer token (random by default)")


def add_exporter_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--exporter-targets-file",
        type=Path,
        help="write Prometheus file_sd targets, one per node, instead of one "
        "target for all (each node's series at /metrics/node/NAME)",
    )
    serve.add_argument(
        "--hostname-is-pod",
        action="store_true",
        help="report the exporter pod's name as Hostname, as dcgm-exporter "
        "does when it is not given the node name",
    )
    serve.add_argument(
        "--hostname-label",
        choices=("Hostname", "hostname"),
        default="Hostname",
        help="the exporter's node label: Hostname, or hostname as newer exporters name it",
    )
    serve.add_argument(
        "--kubernetes-enable-pod-uid",
        action="store_true",
        help="label GPUs a pod holds with its pod_uid, as the exporter does with "
        "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID",
    )
    serve.add_argument(
        "--exporter-counters",
        help="the DCGM fields the exporter collects, comma-separated (as dcgm-exporter's "
        "counters file chooses them); all the default ones unless given",
    )


def add_access_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--readonly-token", help="a read-only bearer token (random by default)")
    serve.add_argument(
        "--rbac",
        type=Path,
        help="Roles, ClusterRoles, bindings and ServiceAccounts (YAML as kubectl apply takes "
        "it): each service account gets a token and a kubeconfig context, and is authorised "
        "by RBAC",
    )


def add_state_and_clock_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--state",
        type=Path,
        help="keep the cluster's objects in FILE across restarts (loaded at start if present, "
        "saved at stop)",
    )
    serve.add_argument(
        "--clock-scale",
        type=float,
        default=1.0,
        help="how fast the cluster clock runs (grace periods, node monitor delays); "
        "POST /kubesim/clock also advances it",
    )
    serve.add_argument(
        "--clock-start",
        type=rfc3339_seconds,
        default=None,
        help="the cluster clock's time at start, as 2026-06-01T12:00:00Z (default: now): "
        "the same seed and start replay the same workload whatever the day and hour",
    )
    serve.add_argument(
        "--mig-reconfigure-seconds",
        type=float,
        default=DEFAULT_DELAY,
        help="seconds of the cluster clock from a change of a node's nvidia.com/mig.config or "
        "nvidia.com/device-plugin.config label to the node advertising the new GPU shape",
    )


def serve(args: argparse.Namespace) -> int:
    """`kubesim serve`: the cluster, its API server and exporter, until SIGTERM or SIGINT."""
    try:
        scenario = generated_scenario(args.nodes) if args.nodes else load_scenario(args.scenario)
        rbac = Rbac.load(args.rbac) if args.rbac else None
    except ScenarioError as exc:
        print(f"kubesim: bad scenario: {exc}", file=sys.stderr)
        return 2
    except RbacFileError as exc:
        print(f"kubesim: bad --rbac file: {exc}", file=sys.stderr)
        return 2
    cluster = Cluster(store=Store(Clock(args.clock_scale)))
    start = time.time() if args.clock_start is None else args.clock_start
    cluster.store.clock.set_now(start)
    try:
        restored = args.state is not None and persistence.load(cluster, args.state)
    except ValueError as exc:
        print(f"kubesim: bad --state file: {exc}", file=sys.stderr)
        return 2
    history = 0.0 if restored or not args.workload else args.history_days * 86400
    runner = populate(cluster, scenario, args, start=start, history=history, restored=restored)
    # The seeded objects live as long as the process: keep the garbage collector from
    # walking millions of them on every full collection (a 1.5 s pause at 114,000 pods).
    gc.freeze()
    admin_token = args.token or secrets.token_urlsafe(24)
    readonly_token = args.readonly_token or secrets.token_urlsafe(24)
    tokens = user_tokens(admin_token, readonly_token, rbac)
    faults = Faults()
    server, scheme, ca = api_server(cluster, args, tokens, rbac, runner, faults)
    MigManager(cluster, faults, delay=args.mig_reconfigure_seconds)
    exporter = Exporter(
        cluster,
        hostname_is_pod=args.hostname_is_pod,
        hostname_label=args.hostname_label,
        pod_uid=args.kubernetes_enable_pod_uid,
        counters=args.exporter_counters.split(",") if args.exporter_counters else None,
    )
    if runner is not None and history:
        replay_history(cluster, runner, exporter, args, history, start)
    exporter_server = exporter_server_for(cluster, exporter, args)
    stop = threading.Event()
    start_controllers(cluster, args, stop)
    serve_forever_in_thread(exporter_server)
    url = args.server_url or f"{scheme}://{args.host}:{server.server_address[1]}"
    accounts = {a.user: a.token for a in rbac.service_accounts} if rbac else {}
    write_kubeconfig(args.kubeconfig, url, admin_token, readonly_token, ca, accounts)
    origin = f"state {args.state}" if restored else f"scenario {scenario.name}"
    announce(cluster, args, origin, url, exporter_server)
    stop_on_signals(stop, server, exporter_server)
    server.serve_forever()
    if args.state is not None:
        persistence.save(cluster, args.state)
    return 0


def populate(
    cluster: Cluster,
    scenario: Scenario,
    args: argparse.Namespace,
    *,
    start: float,
    history: float,
    restored: bool,
) -> WorkloadRunner | None:
    """Seed the scenario (unless the state file restored the cluster) and start the
    workload, the clock wound back `history` seconds for the replay to catch up."""
    if history:
        # From the start of that UTC day: a seed gives the same history all day long.
        began = start - history
        cluster.store.clock.set_now(began - began % 86400)
    if not restored:
        seed(cluster, scenario)
    return start_workload(cluster, args)


def user_tokens(admin_token: str, readonly_token: str, rbac: Rbac | None) -> dict[str, User]:
    """Bearer token -> the user it authenticates: the admin, the viewer, and one per --rbac
    service account."""
    tokens = {
        admin_token: User("kubesim-admin", False, ("system:masters",), admin=True),
        readonly_token: User("kubesim-viewer", True),
    }
    for account in rbac.service_accounts if rbac else []:
        tokens[account.token] = User(account.user, False, account.groups)
    return tokens


def api_server(
    cluster: Cluster,
    args: argparse.Namespace,
    tokens: dict[str, User],
    rbac: Rbac | None,
    runner: WorkloadRunner | None,
    faults: Faults,
) -> tuple[Server, str, Path | None]:
    """The API server, not serving yet; its URL scheme, and the CA a client must trust
    (None without --tls)."""
    api = ApiServer(
        cluster,
        tokens,
        audit_path=args.audit_log,
        faults=faults,
        server_address=f"{args.host}:{args.port}",
        rbac=rbac,
        workload=runner,
    )
    server = make_server(api, args.host, args.port)
    if not args.tls:
        return server, "http", None
    # Kept next to the kubeconfig: a restart reuses them, so clients keep trusting it.
    ca, crt, key = make_certificates(args.kubeconfig.parent / "kubesim-tls", args.host)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(crt, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return server, "https", ca


def exporter_server_for(
    cluster: Cluster, exporter: Exporter, args: argparse.Namespace
) -> ThreadingHTTPServer:
    """The exporter's HTTP server, not serving yet, and the targets file if asked."""
    exporter_server = make_exporter_server(exporter, args.host, args.metrics_port)
    if args.exporter_targets_file:
        nodes = sorted(cluster.store.objects["nodes"])
        write_targets_file(
            args.exporter_targets_file,
            nodes,
            f"{args.host}:{exporter_server.server_address[1]}",
            {node: exporter.exporter_pod(node) for node in nodes},
        )
    return exporter_server


def start_controllers(cluster: Cluster, args: argparse.Namespace, stop: threading.Event) -> None:
    """The scheduler, the clock's timers and --churn, each a thread until `stop` is set."""
    threading.Thread(target=cluster.run_scheduler, args=(stop,), daemon=True).start()
    threading.Thread(target=cluster.timers.run_forever, args=(stop,), daemon=True).start()
    if args.churn > 0:
        threading.Thread(target=Churn(cluster, args.churn).run, args=(stop,), daemon=True).start()


def announce(
    cluster: Cluster,
    args: argparse.Namespace,
    origin: str,
    url: str,
    exporter_server: ThreadingHTTPServer,
) -> None:
    """What runs and where, for whoever started it."""
    nodes = len(cluster.store.objects["nodes"])
    pods = len(cluster.store.objects["pods"])
    print(f"kubesim: {origin}: {nodes} nodes, {pods} pods", flush=True)
    print(f"kubesim: API server on {url}", flush=True)
    print(
        f"kubesim: dcgm-exporter on http://{args.host}:{exporter_server.server_address[1]}/metrics",
        flush=True,
    )
    print(f"kubesim: kubeconfig {args.kubeconfig}", flush=True)


def stop_on_signals(
    stop: threading.Event, server: Server, exporter_server: ThreadingHTTPServer
) -> None:
    def shutdown(*_: object) -> None:
        stop.set()
        # From other threads: shutdown() waits for serve_forever, which runs in this one.
        threading.Thread(target=server.shutdown, daemon=True).start()
        threading.Thread(target=exporter_server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)


if __name__ == "__main__":
    sys.exit(main())
