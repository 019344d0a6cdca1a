"""kubesim servers forked from one process that has already imported kubesim.

The tests start a fresh kubesim for about 250 tests. Each `python -m kubesim serve` spends
about a second of CPU importing kubesim and the Kubernetes client before it seeds its
cluster, on a machine of two cores that the whole suite shares. A zygote imports them once
per test process; every server is then a fork of it that runs the very `main(argv)` the
command line runs, in a process of its own, so no state passes from one test's cluster to
the next. The zygote runs no thread, so forking it is safe.

Protocol: one JSON request a connection on a Unix socket, one JSON answer.
  {"op": "start", "argv": [...], "cwd": "...", "log": "..."} -> {"pid": N}
  {"op": "status", "pid": N} -> {"returncode": null | int}
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from controlplane.launch import die_with_parent


def serve(path: str) -> None:
    """The zygote's loop: imports kubesim, then forks a server for each start request;
    it ends when its test process does."""
    parent = os.getppid()
    import kubesim.__main__ as entry  # the expensive imports, once

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    listener.settimeout(1.0)
    exited: dict[int, int] = {}
    print("ready", flush=True)
    while True:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:
                return  # orphaned: the test process is gone, and with us the servers
            continue
        connection.settimeout(None)
        with connection:
            request = json.loads(connection.makefile("rb").readline())
            _reap(exited)
            if request["op"] == "start":
                answer: dict[str, Any] = {"pid": _fork(entry, request, listener, connection)}
            else:
                answer = {"returncode": exited.get(int(request["pid"]))}
            connection.sendall(json.dumps(answer).encode() + b"\n")


def _reap(exited: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        exited[pid] = os.waitstatus_to_exitcode(status)


def _fork(entry: Any, request: dict[str, Any], *sockets: socket.socket) -> int:
    assert threading.active_count() == 1, "the zygote must not run threads: it forks"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for sock in sockets:
            sock.close()
        # No server outlives its zygote. (Not the zygote itself: the signal follows the
        # thread that forked, and a test may start the zygote from a thread that ends.)
        die_with_parent()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        os.chdir(request["cwd"])
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        sys.argv = ["kubesim", *request["argv"]]
        try:
            code = entry.main(request["argv"]) or 0
        except SystemExit as exit_:  # as the interpreter ends on one: a message is code 1
            if exit_.code is None or isinstance(exit_.code, int):
                code = exit_.code or 0
            else:
                print(exit_.code, file=sys.stderr)
                code = 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class ForkedProcess:
    """A forked server seen as the tests see a subprocess.Popen: pid, poll, wait,
    terminate, kill. Signals go through a pidfd, so a recycled pid is never hit."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        if self.returncode is None and self._ended():
            # The zygote reaps its children whenever it is asked anything.
            while (
                code := self.zygote.request({"op": "status", "pid": self.pid})["returncode"]
            ) is None:
                time.sleep(0.01)
            self.returncode = code
            os.close(self._pidfd)
        return self.returncode

    def _ended(self) -> bool:
        readable, _, _ = select.select([self._pidfd], [], [], 0)
        return bool(readable)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kubesim pid {self.pid}", timeout or 0)
            time.sleep(0.02)
        return code

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The test process's zygote, started at its first kubesim."""

    def __init__(self, workdir: Path) -> None:
        self.path = str(workdir / "zygote.sock")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.kubesim_zygote", self.path],
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.PIPE,
            stderr=(workdir / "zygote.log").open("wb"),
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the kubesim zygote did not start: see {workdir}/zygote.log")

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(self.path)
            sock.sendall(json.dumps(body).encode() + b"\n")
            return json.loads(sock.makefile("rb").readline())  # type: ignore[no-any-return]

    def start(self, argv: list[str], cwd: Path, log: Path) -> ForkedProcess:
        pid = self.request({"op": "start", "argv": argv, "cwd": str(cwd), "log": str(log)})
        return ForkedProcess(self, int(pid["pid"]))


if __name__ == "__main__":
    serve(sys.argv[1])
