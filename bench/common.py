"""Small helpers shared by the benchmark scripts: medians, percentiles, keep-alive HTTP."""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import time
from collections.abc import Callable
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
