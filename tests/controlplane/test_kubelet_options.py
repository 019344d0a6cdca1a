"""The options for thousands of simulated nodes (`bench.control_plane`, `bench.moves
--backend kubernetes`): fewer pods a node, spread heartbeats, the controllers' request
rate; without them everything is as before."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from controlplane.launch import Options, controller_manager_argv, scheduler_argv
from kubesim.kubelet import command
from kubesim.kubelet.agent import Heartbeats
from kubesim.scenario import generated_scenario

pytestmark = pytest.mark.kubernetes  # the directory's mark; no cluster is started


def kubelet_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_command(parser.add_subparsers())
    return parser.parse_args(["kubelet", "--kubeconfig", "/nonexistent", *argv])


def test_fewer_pods_keeps_at_most_that_many_a_node() -> None:
    scenario = generated_scenario(20)
    fewer = command.fewer_pods(scenario, 1)
    assert [g.count for g in fewer.groups] == [g.count for g in scenario.groups]
    assert all(sum(spec.count for spec in g.pods) == 1 for g in fewer.groups)
    assert all(sum(spec.count for spec in g.pods) > 1 for g in scenario.groups)
    assert all(not g.pods for g in command.fewer_pods(scenario, 0).groups)


def test_the_heartbeats_default_to_a_kubelets() -> None:
    args = kubelet_args()
    assert Heartbeats() == Heartbeats(
        args.lease_renew_seconds, args.lease_duration_seconds, args.status_seconds
    )
    assert (Heartbeats().lease_renew_seconds, Heartbeats().lease_duration_seconds) == (10, 40)
    assert args.workers == 1 and args.pods_per_node is None


@pytest.mark.parametrize(
    "argv",
    [
        ("--scenario", "demo", "--pods-per-node", "1"),
        ("--nodes", "10", "--pods-per-node", "-1"),
        ("--nodes", "10", "--workers", "0"),
        ("--nodes", "10", "--lease-renew-seconds", "60", "--lease-duration-seconds", "40"),
    ],
)
def test_a_bad_option_is_refused_in_one_line(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert command.run(kubelet_args(*argv)) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_controllers_rate_is_upstreams_unless_raised() -> None:
    binaries, kubeconfig = Path("/bin"), Path("/k")
    assert not any("qps" in a for a in scheduler_argv(binaries, kubeconfig, 1))
    raised = scheduler_argv(binaries, kubeconfig, 1, Options(kube_api_qps=100))
    assert {"--kube-api-qps=100", "--kube-api-burst=200"} <= set(raised)

    class Pki:
        sa_key = ca_crt = Path("/pki")

    manager = controller_manager_argv(binaries, kubeconfig, Pki(), 1, Options(kube_api_qps=100))  # type: ignore[arg-type]
    assert "--kube-api-qps=100" in manager


def test_a_kubelet_with_workers_starts_every_pod_on_the_real_control_plane() -> None:
    """With --workers, pods start in the kubelet's worker threads (one thread posting every
    start held 5,000 nodes to about five pods a second): every pod of 40 nodes, the
    DaemonSets' included, runs on a control plane of its own (about 25 s)."""
    root = Path(__file__).resolve().parents[2]
    bench = [sys.executable, "-m", "bench.control_plane", "--runs", "1", "--nodes", "40"]
    done = subprocess.run(
        [*bench, "--pods-per-node", "2", "--workers", "4", "--until-pods-run"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "every pod running (160 pods, the DaemonSets' included)" in done.stdout
