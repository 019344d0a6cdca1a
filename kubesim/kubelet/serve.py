"""The kubelet's HTTP side: the DCGM exporter of its nodes (`/metrics`, `/metrics/node/N`)
and the control endpoints a test or the demo uses (bearer token):
- `POST /kubesim/gpus`: utilisation and XID of some GPUs, as on kubesim's own API server;
- `POST /kubesim/exporter`: a node's exporter off or on;
- `POST /kubesim/nodes` (`{"node": N, "lost": true}`): the node's heartbeats stop, or resume;
- `POST /kubesim/clock` (`{"advance": S}`): the kubelets' grace periods and run times
  S seconds nearer;
- `POST /kubesim/reset`: the scenario's state again, between tests (`kubesim.kubelet.reset`).
"""

from __future__ import annotations

import hmac
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubesim.cluster import GpuOverride
from kubesim.dcgm import METRICS_CONTENT_TYPE, Exporter, exporter_page
from kubesim.kubelet.agent import Kubelet
from kubesim.kubelet.reset import reset


def control(kubelet: Kubelet, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    mirror = kubelet.mirror
    if path == "/kubesim/reset":
        return 200, reset(kubelet)
    if path == "/kubesim/clock":
        return 200, {"due": kubelet.advance(float(body.get("advance", 0)))}
    node = str(body.get("node", ""))
    if node not in kubelet.nodes:
        return 404, {"error": f"node {node!r} is not one of this kubelet's nodes"}
    if path == "/kubesim/gpus":
        count = int(kubelet.nodes[node]["status"]["allocatable"].get("nvidia.com/gpu", "0"))
        wanted = body.get("gpu", 0)
        indexes = list(range(count)) if wanted == "all" else wanted
        indexes = indexes if isinstance(indexes, list) else [indexes]
        for index in indexes:
            override = mirror.gpu_overrides.setdefault((node, int(index)), GpuOverride())
            if "util" in body:
                override.util = None if body["util"] is None else float(body["util"])
            if "xid" in body:
                override.xid = None if body["xid"] is None else int(body["xid"])
        return 200, {"node": node, "gpus": indexes}
    if path == "/kubesim/exporter":
        if body.get("enabled", True):
            mirror.exporter_disabled.discard(node)
        else:
            mirror.exporter_disabled.add(node)
        return 200, {"node": node, "enabled": node not in mirror.exporter_disabled}
    if path == "/kubesim/nodes":
        if body.get("lost"):
            kubelet.lose(node)
        else:
            kubelet.recover(node)
        return 200, {"node": node, "lost": node in kubelet.lost}
    return 404, {"error": f"no control endpoint {path}"}


def make_server(
    kubelet: Kubelet, exporter: Exporter, host: str, port: int, token: str
) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            body = exporter_page(exporter, self.path)
            if body is None:
                self._send(404, b"", "text/plain")
            else:
                self._send(200, body, METRICS_CONTENT_TYPE)

        def do_POST(self) -> None:
            given = self.headers.get("Authorization", "").removeprefix("Bearer ")
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not hmac.compare_digest(given.encode(), token.encode()):
                status, answer = 401, {"error": "a bearer token is needed"}
            else:
                try:
                    status, answer = control(
                        kubelet, self.path.split("?")[0], json.loads(raw or b"{}")
                    )
                except (ValueError, TypeError) as error:
                    status, answer = 400, {"error": str(error)}
                except Exception as error:  # noqa: BLE001 - the caller reads why, not a hang-up
                    status, answer = 500, {"error": f"{type(error).__name__}: {error}"}
            self._send(status, json.dumps(answer).encode(), "application/json")

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
