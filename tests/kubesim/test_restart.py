"""A restarted simulator: same CA and certificate, same objects with --state (issue 10.18)."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path
from urllib.parse import urlsplit

from kubernetes import client

from tests.kubesim.conftest import http
from tests.kubesim_process import kubesim_server


def test_tls_reuses_the_ca_and_certificate_next_to_the_kubeconfig(tmp_path: Path) -> None:
    directory = tmp_path / "kubesim-tls"
    with kubesim_server(tmp_path, tls=True):
        first_ca = (directory / "ca.crt").read_bytes()
        first_cert = (directory / "server.crt").read_bytes()
    with kubesim_server(tmp_path, tls=True) as second:
        assert (directory / "ca.crt").read_bytes() == first_ca
        assert (directory / "server.crt").read_bytes() == first_cert
        # A client that trusted the first run trusts the second.
        context = ssl.create_default_context(cadata=first_ca.decode())
        address = urlsplit(second.url)
        with (
            socket.create_connection((address.hostname, address.port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=address.hostname) as tls,
        ):
            assert tls.version() is not None


def test_a_broken_certificate_is_made_again(tmp_path: Path) -> None:
    directory = tmp_path / "kubesim-tls"
    with kubesim_server(tmp_path, tls=True):
        first_ca = (directory / "ca.crt").read_bytes()
    (directory / "server.crt").write_text("not a certificate")
    with kubesim_server(tmp_path, tls=True) as second:
        assert (directory / "ca.crt").read_bytes() != first_ca
        assert second.core().read_node("gpu-new-000").metadata.name == "gpu-new-000"


def test_state_keeps_the_clusters_objects_across_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with kubesim_server(tmp_path / "one", extra=["--state", str(state)]) as first:
        core = first.core()
        core.patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "training"}}})
        core.delete_namespaced_pod("notebook-a100-reserve-000", "research")
        core.delete_namespaced_pod("notebook-a100-reserve-001", "research", grace_period_seconds=0)
        before = core.list_node().metadata.resource_version
    # The simulated cluster goes on writing (heartbeats, events) until it stops: the state
    # keeps at least what was read before, never an older or reset resourceVersion.
    saved = json.loads(state.read_text())["resourceVersion"]
    assert saved >= int(before)
    with kubesim_server(tmp_path / "two", extra=["--state", str(state)]) as second:
        core = second.core()
        assert core.read_node("gpu-new-000").metadata.labels["gpu-pool"] == "training"
        terminating = core.read_namespaced_pod("notebook-a100-reserve-000", "research")
        assert terminating.metadata.deletion_timestamp is not None
        names = [p.metadata.name for p in core.list_namespaced_pod("research").items]
        assert "notebook-a100-reserve-001" not in names
        after = core.list_node()
        assert int(after.metadata.resource_version) >= saved
        assert len(after.items) == 25
        # The watch history did not survive: a watch from before the restart is 410 Gone.
        old = int(before) - 5
        answer = http(second, "GET", f"/api/v1/nodes?watch=true&resourceVersion={old}")
        (event,) = [json.loads(line) for line in answer.body.splitlines()]
        assert event["type"] == "ERROR" and event["object"]["code"] == 410
        # The terminating pod still finishes its grace period.
        second.control("clock", {"advance": 30})
        pods = client.CoreV1Api(second.api_client()).list_namespaced_pod("research")
        assert "notebook-a100-reserve-000" not in [p.metadata.name for p in pods.items]
