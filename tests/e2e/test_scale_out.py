"""Scaling out: two gunicorn instances, two Celery workers with their own hostnames and one
beat, on one database (PostgreSQL when one is reachable, else a SQLite file) and one Redis.

Moves asked for and approved at the same moment through both web instances, with every
execution message sent twice (as a redelivery or the sweep would), still patch each node
exactly once; a session made on one instance works on the other (the session lives in the
shared database, the CSRF secret in its cookie)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

from portal.celery import app as celery_app
from tests.e2e.test_moves_e2e import patches_by_node
from tests.kubesim_process import Kubesim
from tests.servers import RedisServer, stop, wait_for
from tests.web_process import Web, gunicorn
from tests.workers import ROOT, celery_worker

ADMIN_URL = os.environ.get(
    "PORTAL_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
PASSWORD = "scale-out-password-0123"
# Five moves of two nodes each, to every kind of destination.
MOVES = [
    (["a100-reserve-000", "a100-reserve-001"], "training"),
    (["a100-reserve-002", "a100-reserve-003"], "shared"),
    (["a100-reserve-004", "a100-reserve-005"], "inference"),
    (["a100-reserve-006", "a100-reserve-007"], "shared"),
    (["gpu-new-000", "gpu-new-001"], "mixed"),
]
FINAL = {"succeeded", "failed", "partially_failed"}
# Users with a role each, and a token each for the API; printed as JSON.
SET_UP_USERS = f"""
import json
from django.contrib.auth.models import Group, User
from pools.tokens import token_create
tokens = {{}}
for name, role in [("rita", "requesters"), ("arno", "approvers"), ("anna", "approvers")]:
    user = User.objects.create_user(name, password={PASSWORD!r})
    user.groups.add(Group.objects.get(name=role))
    tokens[name] = token_create(user=user, name="scale-out")[1]
print(json.dumps(tokens))
"""


@contextlib.contextmanager
def one_database(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(DATABASE_URL, vendor): a fresh PostgreSQL database when a server is reachable,
    dropped afterwards; else a SQLite file, said in a warning."""
    import psycopg

    admin = ADMIN_URL.replace("postgres://", "postgresql://")
    try:
        connection = psycopg.connect(admin, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        warnings.warn(
            f"scale-out test on SQLite: no PostgreSQL reachable at {ADMIN_URL} ({exc})",
            stacklevel=2,
        )
        yield f"sqlite:///{tmp_path / 'scale-out.sqlite3'}", "sqlite"
        return
    name = f"portal_scale_{uuid.uuid4().hex[:8]}"
    with connection:
        connection.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}", "postgresql"
        finally:
            connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@contextlib.contextmanager
def beat(tmp_path: Path, env: dict[str, str]) -> Iterator[None]:
    log = tmp_path / "beat.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "beat", "-s", str(tmp_path / "beat-db")],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        yield
    finally:
        stop(process)


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released at once; their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        barrier.wait(timeout=30)
        results[index] = call()

    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def api(web: Web, token: str, method: str, path: str, body: dict | None = None) -> Any:  # type: ignore[type-arg]
    response = requests.request(
        method,
        f"{web.url}/api/v1/{path}",
        headers={"Authorization": f"Bearer {token}"},
        json=body,
        timeout=30,
    )
    assert response.status_code < 300, (path, response.status_code, response.text)
    return response.json()


def csrf_token(page: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert match, page[:500]
    return match.group(1)


def sign_in(browser: requests.Session, web: Web) -> None:
    form = browser.get(f"{web.url}/login/", timeout=30).text
    response = browser.post(
        f"{web.url}/login/",
        data={"username": "anna", "password": PASSWORD, "csrfmiddlewaretoken": csrf_token(form)},
        headers={"Referer": f"{web.url}/login/"},
        allow_redirects=False,
        timeout=30,
    )
    assert response.status_code == 302, response.text[:500]


def approve_in_the_page(browser: requests.Session, web: Web, move_id: int) -> int:
    page = browser.get(f"{web.url}/moves/{move_id}/", timeout=30)
    assert page.status_code == 200 and "anna" in page.text  # signed in, on this instance
    response = browser.post(
        f"{web.url}/moves/{move_id}/approve/",
        data={"csrfmiddlewaretoken": csrf_token(page.text), "reason": "from the other web"},
        headers={"Referer": f"{web.url}/moves/{move_id}/"},
        allow_redirects=False,
        timeout=30,
    )
    return response.status_code


def wait_until_final(web: Web, token: str, ids: list[int], timeout: float = 45) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        states = [api(web, token, "GET", f"moves/{i}/")["state"] for i in ids]
        if all(s in FINAL for s in states) or time.monotonic() > deadline:
            return states
        time.sleep(0.3)


def test_two_webs_two_workers_and_a_beat_execute_each_move_once_and_share_sessions(
    kubesim: Kubesim, redis: RedisServer, tmp_path: Path
) -> None:
    broker = f"redis://127.0.0.1:{redis.port}/5"  # its own queue: no other test's messages
    with one_database(tmp_path) as (database, vendor), contextlib.ExitStack() as running:
        env = {
            "DATABASE_URL": database,
            "CELERY_BROKER_URL": broker,
            "CACHE_URL": f"redis://127.0.0.1:{redis.port}/6",
            "KUBECONFIG": str(kubesim.kubeconfig),
            "KUBE_CONTEXT": "",
            "INVENTORY_SYNC_SECONDS": "5",  # the beat's syncs run among the moves
        }
        manage(env, "migrate", "--noinput", "-v", "0")
        manage(env, "sync_inventory")
        tokens = json.loads(manage(env, "shell", "-c", SET_UP_USERS).splitlines()[-1])
        webs = [
            running.enter_context(gunicorn(tmp_path, name=n, workers=1, **env))
            for n in ("web1", "web2")
        ]
        workers = [
            running.enter_context(celery_worker(tmp_path, name=n, concurrency=2, **env))
            for n in ("w1", "w2")
        ]
        running.enter_context(beat(tmp_path, env))

        # A session made on web1 is a session on web2.
        browser = requests.Session()
        sign_in(browser, webs[0])
        assert "anna" in browser.get(f"{webs[1].url}/", timeout=30).text
        assert browser.get(f"{webs[1].url}/moves/", timeout=30).status_code == 200

        asked = together(
            *(
                (
                    lambda i=i, m=m: api(
                        webs[i % 2],
                        tokens["rita"],
                        "POST",
                        "moves/",
                        {"nodes": m[0], "destination": m[1], "reason": f"scale-out {i}"},
                    )
                )
                for i, m in enumerate(MOVES)
            )
        )
        ids = [move["id"] for move in asked]
        decisions = together(
            lambda: approve_in_the_page(browser, webs[1], ids[0]),
            *(
                (
                    lambda i=i: api(
                        webs[i % 2], tokens["arno"], "POST", f"moves/{ids[i]}/approve/", {}
                    )
                )
                for i in range(1, len(ids))
            ),
        )
        assert decisions[0] == 302
        # Every execution message again, as a redelivery or the sweep would send it.
        with celery_app.connection_for_write(broker) as connection:
            for move_id in ids:
                celery_app.send_task(
                    "pools.tasks.execute_move", args=[move_id], connection=connection
                )
        states = wait_until_final(webs[0], tokens["rita"], ids)
        # The second delivery may still be on its way when the moves are final: let the
        # workers take it (received and succeeded: two lines a task) before they stop.
        wait_for(
            lambda: (
                sum(w.log.read_text().count("Task pools.tasks.execute_move[") for w in workers)
                >= 2 * 2 * len(MOVES)
            ),
            timeout=60,
            what="every execution message delivered twice",
        )
    assert states == ["succeeded"] * len(MOVES), states
    patched = patches_by_node(kubesim)
    assert patched == {node: [200] for nodes, _ in MOVES for node in nodes}, patched
    logs = [w.log.read_text() for w in workers]
    received = [log.count("] received") for log in logs]
    assert all(received), f"each worker took tasks: {received}"
    # Each move's execution was delivered twice (waited for above), and ran once.
    print(f"scale-out on {vendor}: tasks received per worker {received}")
