"""A man in the middle for the token endpoint: passes the provider's answer on with its ID
token altered, to show the portal refuses what the provider did not sign."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import rsa


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims_altered(token: str) -> str:
    """Another subject in the claims, the provider's signature left as it was."""
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "1" if claims.get("sub") != "1" else "2"  # never the subject it had
    altered = f"{header}.{_b64(json.dumps(claims).encode())}.{signature}"
    assert altered != token
    return altered


def signed_by_another_key(token: str) -> str:
    """The same claims and key id, signed with a key the provider never published."""
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    forged_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwt.encode(claims, forged_key, algorithm="RS256", headers={"kid": header["kid"]})


def untouched(token: str) -> str:
    return token


@contextlib.contextmanager
def token_proxy(upstream: str, tamper: Callable[[str], str]) -> Iterator[str]:
    """A token endpoint on a free loopback port that forwards to `upstream`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            answer = requests.post(
                upstream,
                data=body,
                headers={"Content-Type": self.headers["Content-Type"]},
                timeout=10,
            )
            payload = answer.json()
            if "id_token" in payload:
                payload["id_token"] = tamper(payload["id_token"])
            out = json.dumps(payload).encode()
            self.send_response(answer.status_code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/token"
    finally:
        server.shutdown()
        server.server_close()
