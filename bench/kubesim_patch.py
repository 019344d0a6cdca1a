"""kubesim's own CPU for the PATCHes of a 200-node move: the requests the portal sends (one
strategic merge patch a node: its pool labels, its whole taint list, its resourceVersion),
over HTTP on one keep-alive connection, to kubesim served in this process with the audit
log on, as `bench.moves` runs it. The CPU is the serving thread's own (thread time), so a
machine shared with other work still gives kubesim's figure.

    .venv/bin/python -m bench.kubesim_patch [--nodes 1000] [--moved 200] [--rounds 5]
        [--clients 1] [--tls] [--profile] [--top 25]

Rounds alternate the moved nodes between training and inference; the last round is
profiled when asked (cProfile with thread time, in the serving threads). With `--clients N`
the nodes are shared among N client processes, each on its own connection, as a move's
worker processes and their threads send them at once.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import http.client
import json
import os
import pstats
import ssl
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubesim.cluster import Cluster
from kubesim.scenario import generated_scenario
from kubesim.seeding import seed
from kubesim.server import ApiServer, Handler, User, make_server
from kubesim.tls import make_certificates

TOKEN = "bench-token"  # noqa: S105 (kubesim in this process only)
# What the portal's default pools set on a node (pools/core/desired.py's patch body).
LABELS = {
    "training": {
        "gpu-pool": "training",
        "workload-type": "training",
        "batch-scheduling": "enabled",
    },
    "inference": {
        "gpu-pool": "inference",
        "workload-type": "inference",
        "batch-scheduling": None,
    },
}


class Serving:
    """The serving threads' CPU (and profile): kept per request by the handler."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.profile: cProfile.Profile | None = None
        self.lock = threading.Lock()

    def handler(self, base: type[Handler]) -> type[Handler]:
        serving = self

        class Measured(base):  # type: ignore[valid-type,misc]
            def handle_one_request(self) -> None:
                started = time.thread_time()
                if serving.profile is not None:
                    serving.profile.enable()
                try:
                    super().handle_one_request()
                finally:
                    if serving.profile is not None:
                        serving.profile.disable()
                    with serving.lock:
                        serving.cpu += time.thread_time() - started

        return Measured


def patch_body(node: dict[str, Any], source: str, destination: str) -> dict[str, Any]:
    taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != f"workload-{source}"]
    taints.append({"key": f"workload-{destination}", "value": "true", "effect": "NoSchedule"})
    return {
        "metadata": {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "labels": LABELS[destination],
        },
        "spec": {"taints": taints},
    }


def one_round(
    connection: http.client.HTTPConnection,
    nodes: dict[str, dict[str, Any]],
    source: str,
    destination: str,
) -> None:
    """PATCH each node in turn, keeping the answers (the next round's resourceVersions)."""
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/strategic-merge-patch+json",
        "User-Agent": "bench-kubesim-patch",
    }
    for name, node in nodes.items():
        body = json.dumps(patch_body(node, source, destination)).encode()
        connection.request("PATCH", f"/api/v1/nodes/{name}", body, headers)
        response = connection.getresponse()
        answer = response.read()
        assert response.status == 200, (response.status, answer[:300])
        nodes[name] = json.loads(answer)


def clients_round(
    port: int,
    context: ssl.SSLContext | None,
    shares: list[dict[str, dict[str, Any]]],
    source: str,
    destination: str,
) -> None:
    """Each share from its own process and connection, all at once; the children read the
    nodes as this process holds them (forked), and this process reads them from the store."""
    children = []
    for share in shares:
        pid = os.fork()
        if pid == 0:
            try:
                one_round(connect(port, context), share, source, destination)
            finally:
                os._exit(0)
        children.append(pid)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        assert status == 0, status


def connect(port: int, context: ssl.SSLContext | None) -> http.client.HTTPConnection:
    if context is None:
        return http.client.HTTPConnection("127.0.0.1", port)
    return http.client.HTTPSConnection("127.0.0.1", port, context=context)


def serve(args: argparse.Namespace, tmp: Path) -> tuple[Any, Serving, ssl.SSLContext | None]:
    cluster = Cluster()
    seed(cluster, generated_scenario(args.nodes))
    gc.freeze()  # as `python -m kubesim serve` does after seeding
    api = ApiServer(
        cluster,
        {TOKEN: User("kubesim-admin", False, ("system:masters",), admin=True)},
        audit_path=tmp / "audit.log",
    )
    server = make_server(api, "127.0.0.1", 0)
    serving = Serving()
    server.RequestHandlerClass = serving.handler(server.RequestHandlerClass)
    client_context = None
    if args.tls:
        ca, crt, key = make_certificates(tmp / "tls", "127.0.0.1")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(crt, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        client_context = ssl.create_default_context(cafile=str(ca))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, serving, client_context


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        server, serving, context = serve(args, Path(tmp_name))
        store = server.RequestHandlerClass.api.cluster.store
        training = sorted(
            name
            for name, found in store.objects["nodes"].items()
            if (found.obj["metadata"].get("labels") or {}).get("gpu-pool") == "training"
        )[: args.moved]
        port = server.server_address[1]
        connection = connect(port, context)

        def send(source: str, destination: str) -> None:
            nodes = {name: store.objects["nodes"][name].obj for name in training}
            if args.clients == 1:
                one_round(connection, nodes, source, destination)
                return
            names = list(nodes)
            shares = [{n: nodes[n] for n in names[i :: args.clients]} for i in range(args.clients)]
            clients_round(port, context, shares, source, destination)

        send("training", "inference")  # warm: connections, caches
        send("inference", "training")
        figures = measured_rounds(send, serving, args, len(training))
        report(figures, serving, args, len(training))
        server.shutdown()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--moved", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    if args.profile and args.clients != 1:
        parser.error("--profile follows one serving thread: use it with --clients 1")
    return args


def measured_rounds(
    send: Callable[[str, str], None], serving: Serving, args: argparse.Namespace, moved: int
) -> list[tuple[float, float]]:
    """(wall, kubesim CPU) seconds of each round; with --profile, one more round, profiled
    and not counted (cProfile slows it)."""
    figures = []
    for round_ in range(args.rounds + (1 if args.profile else 0)):
        source, destination = (
            ("training", "inference") if round_ % 2 == 0 else ("inference", "training")
        )
        if args.profile and round_ == args.rounds:
            serving.profile = cProfile.Profile(time.thread_time)
        serving.cpu, wall = 0.0, time.perf_counter()
        send(source, destination)
        wall = time.perf_counter() - wall
        if serving.profile is None:
            figures.append((wall, serving.cpu))
            print(
                f"round {round_ + 1}: {moved} PATCHes in {wall * 1000:.0f} ms, "
                f"kubesim CPU {serving.cpu * 1000:.0f} ms "
                f"({serving.cpu / moved * 1000:.2f} ms a PATCH)",
                flush=True,
            )
    return figures


def report(
    figures: list[tuple[float, float]], serving: Serving, args: argparse.Namespace, moved: int
) -> None:
    cpu = statistics.median(c for _, c in figures)
    print(
        f"median: kubesim CPU {cpu * 1000:.0f} ms for {moved} PATCHes "
        f"({cpu / moved * 1000:.2f} ms a PATCH) from {args.clients} client(s), wall "
        f"{statistics.median(w for w, _ in figures) * 1000:.0f} ms"
    )
    if serving.profile is not None:
        stats = pstats.Stats(serving.profile)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
