"""docker-compose.yml as an operator sets it up (no Docker engine here: the file is read,
and its commands run against a real gunicorn): the web healthcheck, on which the watcher
waits, passes once DJANGO_ALLOWED_HOSTS names the real host as the file asks; the
simulator profile can write its kubeconfig (a named volume the image's user owns, not a
host directory Docker would create as root)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.test_compose import compose
from tests.deploy.test_compose_security import portal_environment
from tests.edges.portal.test_ipv6_hosts import gunicorn_at, status
from tests.workers import ROOT

DJANGO = ("DJANGO_",)


@pytest.mark.django_db(transaction=True)
def test_the_web_healthcheck_passes_with_the_hosts_the_file_asks_for(tmp_path: Path) -> None:
    env = portal_environment("web", {"DJANGO_ALLOWED_HOSTS": "portal.example.com"})
    django = {name: value for name, value in env.items() if name.startswith(DJANGO)}
    django.pop("DJANGO_SECRET_KEY")  # the tests' own
    test = compose()["services"]["web"]["healthcheck"]["test"]
    assert test[0] == "CMD"
    with gunicorn_at(tmp_path, "127.0.0.1", **django) as url:
        status(f"{url}/healthz")  # the worker's first request loads Django: not timed here
        port = url.rsplit(":", 1)[1]
        argv = [re.sub(r"127\.0\.0\.1:8000", f"127.0.0.1:{port}", part) for part in test[1:]]
        result = subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
        )
    assert result.returncode == 0, result.stderr
    # The watcher starts once the web is healthy.
    assert compose()["services"]["watcher"]["depends_on"]["web"] == {"condition": "service_healthy"}


def test_the_simulator_writes_its_kubeconfig_into_a_volume_its_user_owns() -> None:
    services, volumes = compose()["services"], compose()["volumes"]
    (mount,) = services["kubesim"]["volumes"]
    source, target = mount.rsplit(":", 1)
    assert target == "/kube"  # written, not read-only
    # A bare name is a named volume; a path would be a host directory Docker creates as
    # root, which the image's user (10001) cannot write.
    name = re.fullmatch(r"\$\{KUBECONFIG_DIR:-(\w[\w-]*)\}", source)
    assert name is not None, source
    assert name.group(1) in volumes
    # The portal's services read the same volume by default, read-only.
    for service in ("web", "worker", "beat", "watcher"):
        assert f"{source}:/kube:ro" in services[service]["volumes"], service
    # The image has /kube owned by its user, so a new volume starts owned by it too.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"install -d -o 10001 -g 10001 -m 0755 /kube\b", dockerfile)
