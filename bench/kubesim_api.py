"""kubesim at scale: LIST and PATCH latency at 5,000 nodes, and 50 concurrent clients.

.venv/bin/python -m bench.kubesim_api [--nodes 5000] [--clients 50]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.common import Http, load, summary, timed
from tests.kubesim_process import ADMIN_TOKEN, kubesim_server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests-per-client", type=int, default=40)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, kubesim_server(Path(tmp), nodes=args.nodes) as sim:
        print(f"kubesim with {args.nodes} generated nodes (8 GPUs each)")
        http = Http(sim.url, ADMIN_TOKEN)
        training = node_names(http, "gpu-pool%3Dtraining")
        inference = node_names(http, "gpu-pool%3Dinference")
        time_lists(http)
        time_patches(http, training[1])
        time_clients(sim.url, args.clients, args.requests_per_client, inference)


def node_names(http: Http, selector: str) -> list[str]:
    status, body = http.request("GET", f"/api/v1/nodes?labelSelector={selector}")
    assert status == 200
    return [n["metadata"]["name"] for n in json.loads(body)["items"]]


def time_lists(http: Http) -> None:
    """LIST every node in one page, in pages, and with a label selector."""
    size = 0

    def list_all() -> None:
        nonlocal size
        status, body = http.request("GET", "/api/v1/nodes")
        assert status == 200
        size = len(body)

    print(f"LIST all nodes, one page: {summary(timed(10, list_all))} ({size / 1e6:.1f} MB)")

    def list_paged() -> None:
        token = ""
        while True:
            status, body = http.request("GET", f"/api/v1/nodes?limit=500&continue={token}")
            assert status == 200
            token = json.loads(body)["metadata"].get("continue", "")
            if not token:
                return

    print(f"LIST all nodes in pages of 500: {summary(timed(5, list_paged))}")

    def list_selected() -> None:
        status, _ = http.request("GET", "/api/v1/nodes?labelSelector=gpu-pool%3Dinference")
        assert status == 200

    print(f"LIST with a label selector: {summary(timed(10, list_selected))}")


def time_patches(http: Http, node: str) -> None:
    counter = iter(range(10**9))

    def patch_label() -> None:
        status, _ = http.request(
            "PATCH",
            f"/api/v1/nodes/{node}",
            {"metadata": {"labels": {"bench": str(next(counter))}}},
            "application/strategic-merge-patch+json",
        )
        assert status == 200

    print(f"PATCH a node's labels: {summary(timed(100, patch_label))}")


def time_clients(url: str, clients: int, requests: int, inference: list[str]) -> None:
    """`clients` at once, each GETting inference nodes and one time in four LISTing 100."""
    result = load(
        url,
        [ADMIN_TOKEN] * clients,
        requests,
        lambda index, number: (
            "/api/v1/nodes?labelSelector=gpu-pool%3Dtraining&limit=100"
            if number % 4 == 0
            else f"/api/v1/nodes/{inference[index % len(inference)]}"
        ),
    )
    print(
        f"{clients} concurrent clients, {result.requests} requests (GET node, 1 in "
        f"4 a selected LIST of 100): {result}"
    )


if __name__ == "__main__":
    main()
