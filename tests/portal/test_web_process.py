"""The tests' gunicorn helper waits for its workers without flooding them: one start-up poll
in flight at a time (a CI run once saw workers started with --max-requests recycled forever
by abandoned polls queued while they booted)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.web_process import wait_until_serving

BOOT_SECONDS = 2.5
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


def test_the_start_up_wait_sends_one_request_while_the_workers_boot(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)  # listening, as gunicorn's master is before any worker has booted
    port = listener.getsockname()[1]
    requests: list[bytes] = []

    def worker() -> None:
        time.sleep(BOOT_SECONDS)  # booting: every poll sent meanwhile waits in the backlog
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # the test closed the listener
            with connection:
                requests.append(connection.recv(65536))
                with contextlib.suppress(OSError):  # an abandoned poll: its client has gone
                    connection.sendall(ANSWER)

    serving = threading.Thread(target=worker, daemon=True)
    serving.start()
    master = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/healthz", master, tmp_path / "web.log")
    finally:
        master.kill()
        master.wait()
    # Every poll queued before the answered one was accepted before it.
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    serving.join(timeout=10)
    # Whatever the load, the first poll is still waiting when the worker is up.
    assert len(requests) == 1, requests
    assert requests[0].startswith(b"GET /healthz ")
