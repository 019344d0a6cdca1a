"""kubesim's own CPU for the PATCHes of a 200-node move: the requests the portal sends (one
strategic merge patch a node: its pool labels, its whole taint list, its resourceVersion),
over HTTP on one keep-alive connection, to kubesim served in this process with the audit
log on, as `bench.moves` runs it. The CPU is the serving thread's own (thread time), so a
machine shared with other work still gives kubesim's figure.

    .venv/bin/python -m bench.kubesim_patch [--nodes 1000] [--moved 200] [--rounds 5]
        [--tls] [--profile] [--top 25]

Rounds alternate the moved nodes between training and inference; the last round is
profiled when asked (cProfile with thread time, in the serving thread).
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import json
import pstats
import ssl
import statistics
import tempfile
import threading
import time
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


def serve(args: argparse.Namespace, tmp: Path) -> tuple[Any, Serving, ssl.SSLContext | None]:
    cluster = Cluster()
    seed(cluster, generated_scenario(args.nodes))
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
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--moved", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        server, serving, context = serve(args, Path(tmp_name))
        store = server.RequestHandlerClass.api.cluster.store
        training = sorted(
            name
            for name, found in store.objects["nodes"].items()
            if (found.obj["metadata"].get("labels") or {}).get("gpu-pool") == "training"
        )[: args.moved]
        nodes = {name: store.objects["nodes"][name].obj for name in training}
        port = server.server_address[1]
        connection = (
            http.client.HTTPSConnection("127.0.0.1", port, context=context)
            if context
            else http.client.HTTPConnection("127.0.0.1", port)
        )
        one_round(connection, nodes, "training", "inference")  # warm: connection, caches
        one_round(connection, nodes, "inference", "training")
        figures = []
        for round_ in range(args.rounds + (1 if args.profile else 0)):
            source, destination = (
                ("training", "inference") if round_ % 2 == 0 else ("inference", "training")
            )
            if args.profile and round_ == args.rounds:
                serving.profile = cProfile.Profile(time.thread_time)
            serving.cpu, wall = 0.0, time.perf_counter()
            one_round(connection, nodes, source, destination)
            wall = time.perf_counter() - wall
            if serving.profile is None:
                figures.append((wall, serving.cpu))
                print(
                    f"round {round_ + 1}: {len(nodes)} PATCHes in {wall * 1000:.0f} ms, "
                    f"kubesim CPU {serving.cpu * 1000:.0f} ms "
                    f"({serving.cpu / len(nodes) * 1000:.2f} ms a PATCH)",
                    flush=True,
                )
        cpu = statistics.median(c for _, c in figures)
        print(
            f"median: kubesim CPU {cpu * 1000:.0f} ms for {len(nodes)} PATCHes "
            f"({cpu / len(nodes) * 1000:.2f} ms a PATCH), wall "
            f"{statistics.median(w for w, _ in figures) * 1000:.0f} ms"
        )
        if serving.profile is not None:
            stats = pstats.Stats(serving.profile)
            stats.sort_stats("cumulative").print_stats(args.top)
            stats.sort_stats("tottime").print_stats(args.top)
        server.shutdown()


if __name__ == "__main__":
    main()
