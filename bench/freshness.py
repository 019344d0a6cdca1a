"""Freshness: a node label changed with kubectl, until the API and the node's page show it,
with the inventory watcher running against 5,000 nodes under a churn of 50 pod events a
second.

.venv/bin/python -m bench.freshness [--nodes 5000] [--churn 50] [--changes 50]

kubesim serves the cluster over TLS with `--churn`; `manage.py watch_inventory` runs as its
own process against a fresh SQLite database (or BENCH_DATABASE_URL). Each change is
`kubectl label node NAME gpu-pool=<new value> --overwrite`; the clock starts when kubectl
returns (the API server has stored the change) and stops when `GET /api/v1/nodes/NAME/`
(a token) and `GET /nodes/NAME/` (a session), polled every 20 ms through Django's test
client in this process, first show the new value. The changes start 15 s after the
watcher's initial sync, once it has written the churn that came during the list.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import django_env
from bench.common import ms, percentile
from bench.watch_sync import stamps
from tests.kubesim_process import ROOT, kubesim_server

POLL = 0.02
SETTLE = 15.0


def watcher_start(workdir: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = workdir / "watcher.log"
    process = subprocess.Popen(
        [sys.executable, "manage.py", "watch_inventory"],
        cwd=ROOT,
        env={**os.environ},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    started = time.monotonic()
    while "node rows written" not in stamps(log.read_text()):
        if process.poll() is not None or time.monotonic() - started > 900:
            raise RuntimeError(log.read_text()[-3000:])
        time.sleep(0.2)
    print(f"watcher: initial sync done in {time.monotonic() - started:.1f} s", flush=True)
    # The churn of the list's own minutes is written next: measure the steady state.
    time.sleep(SETTLE)
    return process, log


def one_change(
    kubeconfig: Path, node: str, value: str, api, page, token: str
) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "label",
            "node",
            node,
            f"gpu-pool={value}",
            "--overwrite",
        ],
        check=True,
        capture_output=True,
    )
    changed = time.perf_counter()
    seen_api = seen_page = None
    while seen_api is None or seen_page is None:
        if time.perf_counter() - changed > 60:
            raise RuntimeError(f"{node}={value} not visible after 60 s")
        if seen_api is None:
            answer = api.get(f"/api/v1/nodes/{node}/", HTTP_AUTHORIZATION=f"Bearer {token}")
            if f'"pool_label":"{value}"' in answer.content.decode().replace(" ", ""):
                seen_api = time.perf_counter() - changed
        if seen_page is None and value in page.get(f"/nodes/{node}/").content.decode():
            seen_page = time.perf_counter() - changed
        time.sleep(POLL)
    return seen_api, seen_page


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--churn", type=float, default=50)
    parser.add_argument("--changes", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        extra = ["--churn", str(args.churn)]
        with kubesim_server(
            tmp / "sim", nodes=args.nodes, tls=True, extra=extra, start_timeout=900
        ) as sim:
            django_env.setup(tmp, KUBECONFIG=str(sim.kubeconfig))
            from django.test import Client

            from pools.models import Node
            from pools.tokens import token_create
            from tests.moves_helpers import user_in

            user = user_in("viewers", "bench")
            token = token_create(user=user, name="bench")[1]
            page = Client()
            page.force_login(user)
            watcher, log = watcher_start(tmp)
            try:
                names = list(Node.objects.values_list("name", flat=True))
                rng = random.Random(7)
                to_api, to_page = [], []
                for index in range(args.changes):
                    node = rng.choice(names)
                    api_s, page_s = one_change(
                        sim.kubeconfig, node, f"fresh-{index}", Client(), page, token
                    )
                    to_api.append(api_s)
                    to_page.append(page_s)
            finally:
                watcher.send_signal(signal.SIGTERM)
                watcher.wait(timeout=60)
            print(
                f"{args.changes} label changes at {args.nodes} nodes, churn {args.churn:g} pod "
                f"events/s, {SETTLE:g} s after the initial sync:"
            )
            for what, values in (("API", to_api), ("page", to_page)):
                print(
                    f"  kubectl → {what}: median {ms(statistics.median(values))}, "
                    f"p99 {ms(percentile(values, 0.99))}, max {ms(max(values))}; in order: "
                    + " ".join(f"{v:.2f}" for v in values)
                )
            errors = [line for line in log.read_text().splitlines() if " ERROR " in line]
            print(f"  watcher log: {len(errors)} errors", flush=True)


if __name__ == "__main__":
    main()
