"""The pinned release, and where its binaries are cached.

Kubernetes 1.37 is the newest release whose go.mod asks for Go 1.26 (the machine's Go):
`k8s.io/kubernetes v1.37.2` names `go 1.26.0`. Its staging modules (`k8s.io/api`,
`k8s.io/apiserver`, ...) are published as `v0.37.2`; etcd is the version its go.mod
requires (`go.etcd.io/etcd/client/v3 v3.7.0`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.7.0"
COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")
BINARIES = (*COMPONENTS, "etcd")

_RELEASE = re.compile(r"^v1\.(\d+)\.(\d+)$")
# The oldest and newest minor this project builds and runs against.
SUPPORTED_MINORS = range(34, 38)


class ReleaseError(ValueError):
    """A release the project cannot build: the message is one line an operator can act on."""


@dataclass(frozen=True)
class Release:
    kubernetes: str = KUBERNETES_VERSION
    etcd: str = ETCD_VERSION

    @property
    def staging(self) -> str:
        """The published version of the staging modules: v1.37.2 -> v0.37.2."""
        return "v0" + self.kubernetes[2:]

    @property
    def minor(self) -> int:
        return int(self.kubernetes.split(".")[1])


def release(version: str | None = None) -> Release:
    """The release named `version` (default: the pinned one), or ReleaseError."""
    version = version or os.environ.get("KUBERNETES_VERSION") or KUBERNETES_VERSION
    match = _RELEASE.match(version)
    if match is None:
        raise ReleaseError(
            f"unknown Kubernetes release {version!r}: expected vMAJOR.MINOR.PATCH like "
            f"{KUBERNETES_VERSION}"
        )
    if int(match.group(1)) not in SUPPORTED_MINORS:
        raise ReleaseError(
            f"unknown Kubernetes release {version!r}: this project builds 1."
            f"{SUPPORTED_MINORS.start}-1.{SUPPORTED_MINORS.stop - 1} (pinned: {KUBERNETES_VERSION})"
        )
    return Release(kubernetes=version)


def cache_root() -> Path:
    """Outside the checkout, so every clone (CI's included) reuses one build."""
    configured = os.environ.get("CONTROL_PLANE_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-pool-portal" / "control-plane"


def bin_dir(rel: Release) -> Path:
    return cache_root() / f"kubernetes-{rel.kubernetes}-etcd-{rel.etcd}" / "bin"
