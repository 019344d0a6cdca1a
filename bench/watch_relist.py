"""The inventory watcher's re-list of an unchanged cluster at scale: how many SQL write
statements it costs, and that every node's last_seen moves on.

.venv/bin/python -m bench.watch_relist [--nodes 15000] [--relists 3]

kubesim serves the nodes; in this process the watcher's own steps run against a fresh
database (SQLite, or BENCH_DATABASE_URL): one listing and its flush write every row, then
each re-list of the unchanged cluster is listed and flushed with the statements captured.
The figures that matter are counts (statements by kind, rows sent in them, rows whose
last_seen moved on); the seconds are printed for the record only.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from tests.kubesim_process import kubesim_server

WRITES = ("INSERT", "UPDATE", "DELETE")


def write_statements(captured: list[dict[str, str]]) -> tuple[dict[str, int], int]:
    """Write statements by kind and table (an executemany counts once), and the parameter
    sets they sent (an executemany's rows each; a single statement one): a per-node write
    shows as thousands of them."""
    kinds: collections.Counter[str] = collections.Counter()
    rows = 0
    for query in captured:
        times, _, sql = query["sql"].rpartition(" times: ")
        verb = sql.split()[0]
        if verb not in WRITES:
            continue
        marker = {"INSERT": "INSERT INTO ", "DELETE": "DELETE FROM "}.get(verb, f"{verb} ")
        kinds[f"{verb} {sql.split(marker, 1)[1].split()[0].strip(chr(34))}"] += 1
        rows += int(times) if times else 1
    return dict(kinds), rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=15000)
    parser.add_argument("--relists", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with kubesim_server(tmp / "sim", nodes=args.nodes, start_timeout=900) as sim:
            from bench import django_env

            django_env.setup(tmp, KUBECONFIG=str(sim.kubeconfig))
            from django.db import connection
            from django.test.utils import CaptureQueriesContext
            from django.utils import timezone

            from pools.inventory.watch import WatchState, flush, nodes_relist
            from pools.kube.nodes import core_api
            from pools.models import Node

            core_api()
            state = WatchState()
            nodes_relist(state)
            at = timezone.now()
            flush(state.take(), at)
            present = Node.objects.present().count()
            print(f"first listing: {present} GPU nodes written", flush=True)
            for index in range(args.relists):
                at += timedelta(minutes=5)  # the safety net's interval, on the rows' clock
                started = time.perf_counter()
                with CaptureQueriesContext(connection) as captured:
                    nodes_relist(state)
                    flush(state.take(), at)
                seconds = time.perf_counter() - started
                kinds, rows = write_statements(captured.captured_queries)
                moved = Node.objects.present().filter(last_seen=at).count()
                print(
                    f"re-list {index + 1} of the unchanged cluster: {sum(kinds.values())} write "
                    f"statements {kinds}, {rows} parameter sets sent in them; last_seen moved "
                    f"on for {moved} of {present} nodes ({seconds:.1f} s, list included)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
