"""Small helpers shared by the benchmark scripts: medians, percentiles, keep-alive HTTP."""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def timed(runs: int, action: Callable[[], Any]) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return times


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def summary(times: list[float]) -> str:
    return (
        f"median {ms(statistics.median(times))}, p99 {ms(percentile(times, 0.99))}, n={len(times)}"
    )


class Http:
    """One keep-alive connection with a bearer token (each client thread owns one)."""

    def __init__(self, base_url: str, token: str) -> None:
        parts = urlsplit(base_url)
        self.connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=60
        )
        self.connection.connect()
        # As urllib3 does: without it, a request's body waits on the server's delayed ACK.
        self.connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.headers = {"Authorization": f"Bearer {token}"}

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        headers = dict(self.headers)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        self.connection.request(method, path, body=payload, headers=headers)
        response = self.connection.getresponse()
        return response.status, response.read()


@dataclass
class LoadResult:
    requests: int
    seconds: float
    latencies: list[float]
    errors: int

    def __str__(self) -> str:
        return (
            f"{self.requests / self.seconds:.0f} req/s, "
            f"p50 {ms(statistics.median(self.latencies))}, "
            f"p99 {ms(percentile(self.latencies, 0.99))}, errors {self.errors}"
        )


def load(
    base_url: str, tokens: list[str], requests: int, path_for: Callable[[int, int], str]
) -> LoadResult:
    """One thread a token, each with its own keep-alive connection, `requests` GETs each;
    `path_for(client, request)` says what to ask for."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()

    def client(index: int) -> None:
        nonlocal errors
        http = Http(base_url, tokens[index])
        mine, failed = [], 0
        for number in range(requests):
            started = time.perf_counter()
            try:
                status, _ = http.request("GET", path_for(index, number))
            except OSError:
                status = 0
            mine.append(time.perf_counter() - started)
            failed += status != 200
        with lock:
            latencies.extend(mine)
            errors += failed

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(tokens))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return LoadResult(len(tokens) * requests, time.perf_counter() - started, latencies, errors)


def _get(prometheus_url: str, path: str) -> Any:
    with urllib.request.urlopen(f"{prometheus_url}{path}") as response:  # noqa: S310 -- our own loopback server
        return json.loads(response.read())["data"]


def _busy_spells(prometheus_url: str) -> list[tuple[float, float]]:
    """When Prometheus' periodic work last started (Unix time) and how long it took: the
    scrape of the simulator and each group of recording rules."""
    from datetime import datetime

    def at(stamp: str) -> float:
        return datetime.fromisoformat(stamp).timestamp()

    targets = _get(prometheus_url, "/api/v1/targets?state=active")["activeTargets"]
    spells = [(at(t["lastScrape"]), t["lastScrapeDuration"]) for t in targets]
    groups = _get(prometheus_url, "/api/v1/rules?type=record")["groups"]
    return spells + [(at(g["lastEvaluation"]), g["evaluationTime"]) for g in groups]


def between_prometheus_work(prometheus_url: str, interval: float, room: float) -> None:
    """Wait until neither the simulator's exporter nor Prometheus' recording rules are
    running, and neither will start for `room` seconds (both come every `interval`).
    kubesim renders every simulated GPU's series in Python when scraped (8 s of a core at
    5,000 nodes), and the rules' evaluation takes several seconds of a core at that size:
    on a real cluster, each node's dcgm-exporter and the Prometheus server do that work on
    their own machines, not the portal's. A measurement overlapping them measures them.
    When no such window comes within two intervals (the work fills the minute), it says so
    and returns: the measurement then overlaps them."""
    deadline = time.time() + 2 * interval
    while time.time() < deadline:
        now = time.time()
        if all(
            started + took + 0.5 <= now and now + room <= started + interval
            for started, took in _busy_spells(prometheus_url)
        ):
            return
        time.sleep(0.5)
    print(
        f"  no {room:.0f} s free of the simulator's scrape and the rules' evaluation: "
        "measuring through them",
        flush=True,
    )
