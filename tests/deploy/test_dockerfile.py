"""The image fits the chart: a numeric non-root user, static files built in, no secrets.

There is no container engine here to build it; the Dockerfile is read instead, and
test_read_only_root.py runs the image's commands on a read-only root filesystem.
"""

from __future__ import annotations

import re

import yaml

from tests.deploy.chart import CHART, ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()
INSTRUCTIONS = [
    line for line in re.sub(r"\\\n", " ", DOCKERFILE).splitlines() if line and line[0] != "#"
]


def index_of(pattern: str) -> int:
    found = [i for i, line in enumerate(INSTRUCTIONS) if re.search(pattern, line)]
    assert len(found) == 1, f"{pattern}: {len(found)} instructions match"
    return found[0]


def test_the_image_user_has_the_numeric_ids_the_chart_runs_as() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]
    user = re.search(
        r"useradd .*--uid (\d+) .*--gid (\d+).* (\w+)$", INSTRUCTIONS[index_of("useradd")]
    )
    assert user is not None
    uid, gid, name = int(user.group(1)), int(user.group(2)), user.group(3)
    assert re.search(rf"groupadd .*--gid {gid} {name}\b", DOCKERFILE)
    assert (uid, gid) == (values["runAsUser"], values["runAsGroup"])
    assert uid >= 10000  # clear of the host's own users
    # Numeric: a runAsNonRoot check verifies it without the image's /etc/passwd.
    assert INSTRUCTIONS[index_of(r"^USER ")] == f"USER {uid}:{gid}"
    assert name == "portal"


def test_static_files_are_collected_at_build_time_as_root() -> None:
    collect = index_of(r"manage\.py collectstatic --noinput")
    assert index_of(r"^COPY \. \.") < collect < index_of(r"^USER ")
    # The build step's key is a throwaway, never an ENV that would stay in the image.
    assert not any(line.startswith("ENV") and "SECRET" in line for line in INSTRUCTIONS)


def test_the_default_command_writes_nothing_on_the_root_filesystem() -> None:
    cmd = INSTRUCTIONS[index_of(r"^CMD ")]
    assert '"--worker-tmp-dir", "/dev/shm"' in cmd
    assert '"--no-control-socket"' in cmd


def test_the_build_context_leaves_out_secrets_and_local_state() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".env", ".demo", ".venv", ".git", "db.sqlite3"} <= ignored


def test_the_image_carries_no_tests_benchmarks_or_docs() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {"tests", "bench", "docs", "controlplane", "scripts"} <= ignored
    # What the image runs stays: the portal, and kubesim for compose's simulator profile.
    assert not {"pools", "portal", "kubesim", "templates", "static"} & ignored
