"""The lean node session against kubesim: credentials read through the client's
configuration (here an exec plugin), once for many calls, and again after a 401; over TLS,
the kubeconfig's CA trusted and no other."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubesim.tls import make_certificates
from pools.kube.errors import KubeRefused
from pools.kube.nodes import read_node
from pools.kube.patcher import _send_patch
from tests.kubesim_process import ADMIN_TOKEN, Kubesim, kubesim_server

# Prints the token in TOKEN_FILE as an ExecCredential that has already expired, so the
# client's refresh hook runs the plugin every time credentials are asked for; each run is
# a line in RUNS_FILE.
PLUGIN = """
import json, os, sys
with open(os.environ["RUNS_FILE"], "a") as runs:
    runs.write("run\\n")
token = open(os.environ["TOKEN_FILE"]).read().strip()
json.dump({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
           "status": {"token": token, "expirationTimestamp": "2000-01-01T00:00:00Z"}}, sys.stdout)
"""


@pytest.fixture
def exec_login(settings, cluster: Kubesim, tmp_path: Path) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """The portal pointed at kubesim with an exec plugin's token; (token file, runs file)."""
    token, runs, plugin = tmp_path / "token", tmp_path / "runs", tmp_path / "plugin.py"
    token.write_text(ADMIN_TOKEN)
    runs.write_text("")
    plugin.write_text(PLUGIN)
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    admin = next(u for u in config["users"] if u["name"] == "kubesim-admin")
    admin["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
            "env": [
                {"name": "TOKEN_FILE", "value": str(token)},
                {"name": "RUNS_FILE", "value": str(runs)},
            ],
        }
    }
    kubeconfig = tmp_path / "exec.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    settings.KUBECONFIG = str(kubeconfig)
    return token, runs


def plugin_runs(runs: Path) -> int:
    return len(runs.read_text().splitlines())


@pytest.mark.django_db
def test_many_calls_read_the_credentials_once(
    cluster: Kubesim, exec_login: tuple[Path, Path]
) -> None:
    _, runs = exec_login
    assert read_node("gpu-new-000")["metadata"]["name"] == "gpu-new-000"
    loaded = plugin_runs(runs)  # loading the kubeconfig, and the first call's credentials
    for _ in range(4):
        assert read_node("gpu-new-000")["metadata"]["name"] == "gpu-new-000"
    _send_patch("gpu-new-000", {"metadata": {"labels": {"team": "vision"}}})
    assert plugin_runs(runs) == loaded
    assert read_node("gpu-new-000")["metadata"]["labels"]["team"] == "vision"
    assert cluster.count("get", name="gpu-new-000") == 6
    assert cluster.count("patch", name="gpu-new-000") == 1


@pytest.mark.django_db
def test_a_401_reads_the_credentials_again(cluster: Kubesim, exec_login: tuple[Path, Path]) -> None:
    token, runs = exec_login
    token.write_text("revoked-token")
    with pytest.raises(KubeRefused) as refused:
        read_node("gpu-new-000")
    assert refused.value.status == 401
    # The token is renewed (as an exec plugin or a rotated service-account token would be):
    # the next call is answered, without waiting for the credentials' next scheduled read.
    token.write_text(ADMIN_TOKEN)
    before = plugin_runs(runs)
    assert read_node("gpu-new-000")["metadata"]["name"] == "gpu-new-000"
    assert plugin_runs(runs) - before == 1
    assert cluster.count("get", name="gpu-new-000") == 1  # the one answered


@pytest.fixture
def tls_cluster(settings, tmp_path: Path) -> Iterator[Kubesim]:  # type: ignore[no-untyped-def]
    with kubesim_server(tmp_path / "sim", tls=True) as sim:
        settings.KUBECONFIG = str(sim.kubeconfig)
        settings.KUBE_CONTEXT = ""
        settings.PATCH_BACKOFF_SECONDS = 0.01
        yield sim


@pytest.mark.django_db
def test_over_tls_the_kubeconfigs_ca_is_trusted_and_no_other(
    settings, tls_cluster: Kubesim, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _send_patch("gpu-new-000", {"metadata": {"labels": {"team": "vision"}}})
    assert read_node("gpu-new-000")["metadata"]["labels"]["team"] == "vision"
    assert tls_cluster.count("patch", name="gpu-new-000") == 1
    # The same server, with a CA that did not sign its certificate: refused, never retried.
    config = yaml.safe_load(tls_cluster.kubeconfig.read_text())
    other_ca = make_certificates(tmp_path / "other", "127.0.0.1")[0]
    config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        other_ca.read_bytes()
    ).decode()
    untrusting = tmp_path / "other.kubeconfig"
    untrusting.write_text(yaml.safe_dump(config))
    settings.KUBECONFIG = str(untrusting)
    with pytest.raises(KubeRefused, match="CERTIFICATE_VERIFY_FAILED"):
        read_node("gpu-new-000")
    assert tls_cluster.count("get", name="gpu-new-000") == 1  # the one above
