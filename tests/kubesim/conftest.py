"""Helpers for the kubesim conformance tests: raw HTTP, and the machine's kubectl."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.kubesim_process import ADMIN_TOKEN, Kubesim, kubesim_server

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="no kubectl on this machine")


@dataclass
class Answer:
    status: int
    headers: Any
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def http(
    sim: Kubesim,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    accept: str = "application/json",
    token: str = ADMIN_TOKEN,
    timeout: float = 10,
) -> Answer:
    """One request as any HTTP client would send it; the answer whatever its status."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        sim.url + path,
        data=data,
        method=method,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": content_type,
            "Accept": accept,
        },
    )
    context = None
    if sim.tls:
        context = ssl.create_default_context(
            cafile=str(sim.kubeconfig.parent / "kubesim-tls" / "ca.crt")
        )
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.headers, error.read())


def kubectl(
    sim: Kubesim, *args: str, check: bool = True, context: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    extra = ["--context", context] if context else []
    result = subprocess.run(
        [KUBECTL or "kubectl", *extra, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


@pytest.fixture
def tls_kubesim(tmp_path: Path) -> Iterator[Kubesim]:
    """A fresh cluster over HTTPS, for kubectl (which sends tokens only over TLS)."""
    with kubesim_server(tmp_path, tls=True) as server:
        yield server
