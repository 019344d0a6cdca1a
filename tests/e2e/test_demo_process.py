"""`make demo` as a person runs it: started on free ports, serving, then stopped with SIGTERM
or Ctrl-C to its whole process group; every process it started must be gone and every
port free, so the next `make demo` starts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.servers import free_port, http_ok, port_open, require_program, wait_for

ROOT = Path(__file__).resolve().parents[2]
PORT_VARIABLES = (
    "DEMO_PORT",
    "DEMO_REDIS_PORT",
    "DEMO_PROMETHEUS_PORT",
    "DEMO_KUBESIM_PORT",
    "DEMO_EXPORTER_PORT",
    "DEMO_EAST_KUBESIM_PORT",
    "DEMO_EAST_EXPORTER_PORT",
    "DEMO_EAST_PROMETHEUS_PORT",
)


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) for every process, from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # The command name is in parentheses and may hold spaces: split after its end.
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), fields[0])
    return table


def descendants(root: int) -> set[int]:
    table = process_table()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    table = process_table()
    return {pid for pid in pids if pid in table and table[pid][1] != "Z"}


@dataclass
class Demo:
    process: subprocess.Popen[bytes]
    ports: dict[str, int]
    log: Path
    started: set[int] = field(default_factory=set)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_program("redis-server")
    require_program("prometheus")
    # Shared by the runs, as `.demo/` is: the second run reuses the migrated database.
    return tmp_path_factory.mktemp("demo-state")


def default_stop_signals() -> None:
    """The stop signals at their defaults, as a terminal's shell starts a job. An ignored
    signal stays ignored through exec, and GNU make installs no handler for a SIGINT it
    found ignored: a test process that ignores it (as some library in a long test run may
    leave it) would make `make` deaf to the Ctrl-C the test sends."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _log_sizes(state_dir: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in (state_dir / "logs").glob("*.log")}


def _lost_a_port_race(state_dir: Path, sizes: dict[Path, int]) -> bool:
    """Whether a server of the demo found its port taken since `sizes`: another test's
    process bound it between free_port() and the server's own bind (four test processes
    share the machine's ports). Any other exit is the demo's own failure."""
    for path in (state_dir / "logs").glob("*.log"):
        with path.open("rb") as log:
            log.seek(sizes.get(path, 0))
            if b"address already in use" in log.read():
                return True
    return False


def _start(argv: list[str], state_dir: Path, tmp_path: Path, *, east: bool = True) -> Demo:
    """The demo started with free ports, waited for until it serves or ends."""
    ports = {name: free_port() for name in PORT_VARIABLES}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PORTAL_"))}
    env.update({name: str(port) for name, port in ports.items()})
    env["DEMO_STATE_DIR"] = str(state_dir)
    # No history: these tests stop the demo once it serves, and a month's samples (about
    # 1 GB) would only keep kubesim and promtool busy on the cores the other tests share.
    env["DEMO_HISTORY_DAYS"] = "0"
    if not east:  # one cluster: a test of how make passes signals has no use for two
        env["DEMO_EAST"] = "false"
    log = tmp_path / "demo.out"
    with log.open("wb") as out:
        # Its own process group, as `make demo` has in a terminal.
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=default_stop_signals,
        )
    started = Demo(process, ports, log)
    wait_for(
        lambda: process.poll() is not None or "Ctrl-C stops everything" in started.output(),
        timeout=180,
        what="the demo to serve",
    )
    return started


def test_only_a_port_lost_since_the_start_counts_as_a_race(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "prometheus.log").write_text('err="listen tcp: bind: address already in use"\n')
    sizes = _log_sizes(tmp_path)
    assert not _lost_a_port_race(tmp_path, sizes)  # an earlier run's, not this start's
    with (logs / "prometheus.log").open("a") as log:
        log.write(
            'level=error msg="Unable to start web listener" err="bind: address already in use"\n'
        )
    assert _lost_a_port_race(tmp_path, sizes)
    (logs / "redis.log").write_text("a different failure\n")
    assert _lost_a_port_race(tmp_path, sizes) and not _lost_a_port_race(
        tmp_path, _log_sizes(tmp_path)
    )


@contextlib.contextmanager
def running(
    argv: list[str], state_dir: Path, tmp_path: Path, *, east: bool = True
) -> Iterator[Demo]:
    """`argv` (the demo, or a make that runs it) started, serving; and at the end nothing
    left behind, whatever the test did. A start that lost a port to another test's process
    is tried once more on other ports."""
    sizes = _log_sizes(state_dir)
    running = _start(argv, state_dir, tmp_path, east=east)
    if running.process.poll() is not None and _lost_a_port_race(state_dir, sizes):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.process.pid, signal.SIGKILL)  # whatever it left running
        running = _start(argv, state_dir, tmp_path, east=east)
    process, ports = running.process, running.ports
    try:
        assert process.poll() is None, running.output()
        # Serving, not necessarily answering within a second yet on a loaded machine: its
        # gunicorn workers may still be importing Django, and through `make demo` the
        # system-package check runs first (a full run of the suite once took over 60 s).
        wait_for(
            lambda: http_ok(f"http://127.0.0.1:{ports['DEMO_PORT']}/healthz"),
            timeout=180,
            what="the demo's /healthz",
        )
        running.started = descendants(process.pid)
        yield running
    finally:
        # A failed test must leave nothing behind: the demo, and what it failed to stop.
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for pid in alive(running.started):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def demo(state_dir: Path, tmp_path: Path) -> Iterator[Demo]:
    with running([sys.executable, "scripts/demo.py"], state_dir, tmp_path) as started:
        yield started


@pytest.fixture
def make_demo(state_dir: Path, tmp_path: Path) -> Iterator[Demo]:
    """The demo run by GNU make, as `make demo` runs it (the recipe's last line, without
    the install steps before it)."""
    make = require_program("make")
    makefile = tmp_path / "Makefile"
    makefile.write_text(f"demo:\n\t{sys.executable} {ROOT / 'scripts' / 'demo.py'}\n")
    with running([make, "-f", str(makefile), "demo"], state_dir, tmp_path, east=False) as started:
        yield started


@pytest.mark.parametrize(
    ("signum", "again"),
    [
        # (A single SIGTERM takes the first half of this path: not started once more.)
        # GNU make, terminated, sends its running recipe a SIGTERM of its own: `make demo`
        # gets the group's signal and then make's, in the middle of stopping its children.
        (signal.SIGTERM, True),
        (signal.SIGINT, True),  # an impatient Ctrl-C, Ctrl-C
    ],
    ids=["SIGTERM-as-make-sends-it", "SIGINT-twice"],
)
def test_a_signal_to_the_group_stops_every_child_and_frees_every_port(
    demo: Demo, state_dir: Path, signum: signal.Signals, again: bool
) -> None:
    # It serves on the ports and keeps its state where the environment said.
    assert f"Portal      http://127.0.0.1:{demo.ports['DEMO_PORT']}/" in demo.output()
    assert (state_dir / "logs" / "web.log").exists()
    assert (state_dir / "logs" / "watcher.log").exists()
    started = demo.started
    # redis, kubesim, prometheus, the worker, beat and watcher, gunicorn, and their children.
    assert len(started) >= 7, demo.output()
    assert all(port_open(port) for port in demo.ports.values()), demo.ports
    # DEMO_HISTORY_DAYS reached the simulator: no history, as this test asked, not a month;
    # and nothing is written for promtool to import.
    commands = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in started]
    kubesim = next(c for c in commands if c[1:4] == [b"-m", b"kubesim", b"serve"])
    assert kubesim[kubesim.index(b"--history-days") + 1] == b"0", kubesim
    assert b"--history-openmetrics" not in kubesim, kubesim
    # The second cluster: its own simulator and watcher, and the portal reports both.
    assert sum(c[1:4] == [b"-m", b"kubesim", b"serve"] for c in commands) == 2, commands
    assert (state_dir / "logs" / "east-watcher.log").exists()
    try:  # 503 while a check fails: the body says the same
        with urllib.request.urlopen(f"http://127.0.0.1:{demo.ports['DEMO_PORT']}/readyz") as r:
            body = r.read()
    except urllib.error.HTTPError as error:
        body = error.read()
    kubernetes = json.loads(body)["checks"]["kubernetes"]
    assert "cluster east: API server" in str(kubernetes), kubernetes

    os.killpg(demo.process.pid, signum)
    if again:
        time.sleep(0.3)
        with contextlib.suppress(ProcessLookupError):
            os.kill(demo.process.pid, signum)
    assert demo.process.wait(timeout=60) == 0, demo.output()

    assert alive(started) == set(), demo.output()
    busy = {name: port for name, port in demo.ports.items() if port_open(port)}
    assert busy == {}, demo.output()
    assert f"demo: {signum.name} received, stopping every child" in demo.output()


# SIGINT (a supervisor's stop, job control's Ctrl-C): SIGHUP, a closed terminal, takes the
# same watch of make's caught signals and is not started once more.
@pytest.mark.parametrize("signum", [signal.SIGINT], ids=["SIGINT"])
def test_a_signal_to_makes_own_process_stops_every_child_and_frees_every_port(
    make_demo: Demo, signum: signal.Signals
) -> None:
    """Supervisors and terminals' job control signal the process they started, `make`, not
    its group. GNU make passes on only SIGTERM: for these it waits for the demo, which
    must see that by itself."""
    started = make_demo.started
    assert len(started) >= 8, make_demo.output()  # make, the demo and the demo's children
    os.kill(make_demo.process.pid, signum)
    make_demo.process.wait(timeout=60)
    assert alive(started) == set(), make_demo.output()
    busy = {name: port for name, port in make_demo.ports.items() if port_open(port)}
    assert busy == {}, make_demo.output()
    assert f"demo: {signum.name} received, stopping every child" in make_demo.output()


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("DEMO_PORT", "eighty", "expected a whole number from 1 to 65535, got 'eighty'"),
        ("DEMO_HISTORY_DAYS", "-1", "expected a whole number from 0 to 30, got -1"),
        ("DEMO_HISTORY_DAYS", "31", "expected a whole number from 0 to 30, got 31"),
    ],
)
def test_a_malformed_setting_is_one_line(name: str, value: str, error: str) -> None:
    result = subprocess.run(
        [sys.executable, "scripts/demo.py"],
        cwd=ROOT,
        env={**os.environ, name: value},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == f"demo: configuration error: {name}: {error}\n"
