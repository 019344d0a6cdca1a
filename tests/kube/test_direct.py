"""The node session's own connections: only for the plain case, reused while the server
keeps them open, replaced when it closed one meanwhile, and a broken exchange transient."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator

import pytest
import urllib3

from pools.kube.client import translate
from pools.kube.direct import DirectPool, direct_pool

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class OneAnswerServer:
    """Answers each connection's first request, then closes it without saying so (as a
    server whose keep-alive timeout ran out does); counts the connections."""

    def __init__(self, *, answer: bytes = ANSWER) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.answer, self.connections = answer, 0
        self.closed = threading.Event()  # set when a connection was closed
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(4096)
                conn.sendall(self.answer)
            self.closed.set()


@pytest.fixture
def server() -> Iterator[OneAnswerServer]:
    served = OneAnswerServer()
    yield served
    served.listener.close()


def test_a_connection_closed_while_idle_is_replaced(server: OneAnswerServer) -> None:
    pool = DirectPool("127.0.0.1", server.port, None)
    for _ in range(3):
        answer = pool.request("GET", "/api/v1/nodes/n", None, {}, timeout=5)
        assert (answer.status, answer.data) == (200, b"{}")
        assert server.closed.wait(5)  # closed while the connection waits in the pool
        server.closed.clear()
    assert server.connections == 3


def test_a_broken_answer_is_transient() -> None:
    broken = OneAnswerServer(answer=b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")
    pool = DirectPool("127.0.0.1", broken.port, None)
    with pytest.raises(urllib3.exceptions.ProtocolError) as raised:
        pool.request("GET", "/api/v1/nodes/n", None, {}, timeout=5)
    assert translate(raised.value, doing="reading node n").transient
    broken.listener.close()


def test_only_the_plain_case_is_taken() -> None:
    plain = urllib3.HTTPSConnectionPool("api.example", 6443, cert_reqs="CERT_REQUIRED")
    found = direct_pool(plain)
    assert found is not None and isinstance(found.context, ssl.SSLContext)
    assert direct_pool(urllib3.HTTPConnectionPool("api.example", 8080)) is not None
    others = [
        urllib3.HTTPSConnectionPool("api.example", 6443, cert_reqs="CERT_NONE"),
        urllib3.HTTPSConnectionPool("api.example", 6443, assert_hostname="other.example"),
        urllib3.HTTPSConnectionPool("api.example", 6443, assert_fingerprint="00" * 32),
        urllib3.HTTPSConnectionPool("api.example", 6443, server_hostname="other.example"),
        urllib3.HTTPSConnectionPool(
            "api.example", 6443, _proxy=urllib3.util.parse_url("http://p:3128")
        ),
    ]
    assert [direct_pool(pool) for pool in others] == [None] * len(others)
