"""The control plane's build and release choice, without building: the pinned release, the
go.mod that points the staging modules at their published versions, and the one-line
errors for an unknown release, a failed build and a taken port."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from controlplane.build import failure_summary, kubernetes_go_mod, version_ldflags
from controlplane.launch import ControlPlaneError, Ports
from controlplane.release import KUBERNETES_VERSION, ReleaseError, release

# With the real control plane's other tests: they run in one process (tests/conftest.py).
pytestmark = pytest.mark.kubernetes

UPSTREAM = """module k8s.io/kubernetes

go 1.26.0

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver
)
"""


def test_the_pinned_release_and_its_staging_version() -> None:
    rel = release()
    assert rel.kubernetes == KUBERNETES_VERSION == "v1.37.2"
    assert rel.staging == "v0.37.2"


@pytest.mark.parametrize("version", ["v1.99.0", "1.37.2", "latest", "v1.33.0", "v2.0.0"])
def test_an_unknown_release_is_refused_with_one_line(version: str) -> None:
    with pytest.raises(ReleaseError, match="unknown Kubernetes release"):
        release(version)
    done = subprocess.run(
        [sys.executable, "-m", "controlplane", "--release", version, "where"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"control plane: unknown Kubernetes release '{version}'")


def test_staging_modules_are_replaced_by_their_published_versions() -> None:
    go_mod = kubernetes_go_mod(release(), UPSTREAM)
    assert "require k8s.io/kubernetes v1.37.2" in go_mod
    assert "\tk8s.io/api => k8s.io/api v0.37.2\n" in go_mod
    assert "\tk8s.io/apiserver => k8s.io/apiserver v0.37.2\n" in go_mod
    assert "./staging" not in go_mod
    assert "\ngo 1.26.0\n" in go_mod


def test_the_binaries_are_stamped_with_the_release() -> None:
    flags = version_ldflags(release())
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.2" in flags
    assert "-X k8s.io/component-base/version.gitMinor=37" in flags


@pytest.mark.parametrize(
    ("stderr", "named"),
    [
        (
            "# k8s.io/apiserver/pkg/server\n../server/config.go:12:2: undefined: foo\n",
            "package k8s.io/apiserver/pkg/server: ../server/config.go:12:2: undefined: foo",
        ),
        (
            "go: k8s.io/kube-aggregator@v0.37.2: reading https://proxy/...: 404 Not Found\n",
            "module k8s.io/kube-aggregator@v0.37.2: reading https://proxy/...: 404 Not Found",
        ),
    ],
)
def test_a_failed_build_names_the_package_or_module(stderr: str, named: str) -> None:
    assert failure_summary(stderr) == named


def test_a_port_in_use_is_refused_before_anything_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ControlPlaneError, match=f"port {port} on 127.0.0.1 is in use"):
            Ports.pick(port)
