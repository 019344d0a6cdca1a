"""The tests' kubesim servers are forks of a zygote that imported kubesim once: each must
behave as `python -m kubesim serve` does, in a process of its own."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.kubesim_process import ROOT, kubesim_server
from tests.kubesim_zygote import Zygote
from tests.servers import wait_for


def test_a_refused_option_ends_as_the_command_line_does(tmp_path: Path) -> None:
    argv = ["serve", "--scenario", "no-such-scenario", "--port", "0"]
    command = subprocess.run(
        [sys.executable, "-m", "kubesim", *argv], cwd=ROOT, capture_output=True, check=False
    )
    zygote = Zygote(tmp_path)
    try:
        forked = zygote.start(argv, ROOT, tmp_path / "forked.log")
        assert forked.wait(timeout=60) == command.returncode != 0
        assert (tmp_path / "forked.log").read_bytes() == command.stdout + command.stderr
    finally:
        zygote.process.kill()
        zygote.process.wait()


def test_each_server_is_its_own_process_and_keeps_its_own_cluster(tmp_path: Path) -> None:
    with (
        kubesim_server(tmp_path / "one") as one,
        kubesim_server(tmp_path / "two") as two,
    ):
        assert one.process.pid != two.process.pid
        body = {"metadata": {"labels": {"touched": "yes"}}}
        one.core().patch_node("a100-reserve-000", body)
        assert one.core().read_node("a100-reserve-000").metadata.labels["touched"] == "yes"
        assert "touched" not in two.core().read_node("a100-reserve-000").metadata.labels
        two.process.send_signal(signal.SIGTERM)
        assert two.process.wait(timeout=30) == 0  # kubesim's own clean stop
        assert one.process.poll() is None


def test_a_server_dies_with_its_zygote(tmp_path: Path) -> None:
    zygote = Zygote(tmp_path)
    port = ["--port", "0", "--metrics-port", "0", "--kubeconfig", str(tmp_path / "kc")]
    forked = zygote.start(["serve", *port], ROOT, tmp_path / "forked.log")
    wait_for((tmp_path / "kc").exists, timeout=60, what="the forked kubesim")
    zygote.process.kill()
    zygote.process.wait()
    # Its parent gone, the server is killed (PR_SET_PDEATHSIG), not left serving.
    wait_for(lambda: _gone(forked.pid), timeout=30, what="the orphaned server to die")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except FileNotFoundError:
        return True
    return state == "Z"


TEST_PROCESS = """
import sys
from pathlib import Path
from tests.kubesim_process import ROOT
from tests.kubesim_zygote import Zygote
workdir = Path(sys.argv[1])
zygote = Zygote(workdir)
port = ["--port", "0", "--metrics-port", "0", "--kubeconfig", str(workdir / "kc")]
server = zygote.start(["serve", *port], ROOT, workdir / "server.log")
print(zygote.process.pid, server.pid, flush=True)
input()
"""


def test_a_killed_test_process_leaves_no_zygote_and_no_server(tmp_path: Path) -> None:
    test_process = subprocess.Popen(
        [sys.executable, "-c", TEST_PROCESS, str(tmp_path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert test_process.stdout is not None
    zygote, server = map(int, test_process.stdout.readline().split())
    wait_for((tmp_path / "kc").exists, timeout=60, what="the forked kubesim")
    test_process.kill()
    test_process.wait()
    wait_for(lambda: _gone(zygote) and _gone(server), timeout=30, what="both to end")
