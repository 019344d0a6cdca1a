"""The logs of the real processes, in both formats: gunicorn (its master too) and a Celery
worker running a move. JSON is one event per line with the request id, the user and the
move id; text is readable and says the same; neither ever carries a secret."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.inventory import inventory_sync
from pools.models import MoveRequest, Pool
from portal.celery import app
from tests.e2e.test_moves_e2e import approve, request_move
from tests.factories import demo_inventory
from tests.kubesim_process import Kubesim
from tests.moves_helpers import FINAL, user_in, wait_for_state
from tests.servers import RedisServer, wait_for
from tests.web_process import Web, gunicorn
from tests.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]
SECRET = "hunter2-0123456789"
LEADING = ["timestamp", "level", "logger", "message"]


def events(log: Path) -> list[dict[str, Any]]:
    """Every line of a JSON log as an event: a line that is not JSON fails the test."""
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not one JSON event per line: {line!r}")
    for event in parsed:
        assert list(event)[:4] == LEADING, event
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00", event["timestamp"])
    return parsed


def fetch(web: Web, path: str, **headers: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(f"{web.url}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def browse(web: Web, move: MoveRequest) -> dict[str, str]:
    """A signed-in viewer's requests: with a request id of the caller's, without one, with a
    malformed one, a move's page, and a 404 whose path holds a secret. Their ids by name."""
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    name = django_settings.SESSION_COOKIE_NAME
    cookie = f"{name}={client.cookies[name].value}"
    ids = {}
    status, headers = fetch(web, "/", Cookie=cookie, **{"X-Request-ID": "req-abc-123"})
    assert (status, headers["X-Request-ID"]) == (200, "req-abc-123")
    status, headers = fetch(web, "/moves/", Cookie=cookie)
    assert status == 200 and re.fullmatch(r"[0-9a-f]{32}", headers["X-Request-ID"])
    ids["generated"] = headers["X-Request-ID"]
    status, headers = fetch(web, "/", Cookie=cookie, **{"X-Request-ID": "two words\tand a tab"})
    assert status == 200 and re.fullmatch(r"[0-9a-f]{32}", headers["X-Request-ID"])
    status, headers = fetch(web, f"/moves/{move.pk}/", Cookie=cookie)
    assert status == 200
    ids["move"] = headers["X-Request-ID"]
    status, _ = fetch(web, f"/x/password={SECRET}/")
    assert status == 404
    return ids


def a_move() -> MoveRequest:
    demo_inventory()
    return moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=Pool.objects.get(name="shared"),
        reason="logs",
        now=timezone.now(),
    )


def test_the_web_logs_json_events_with_request_id_user_and_move(tmp_path: Path) -> None:
    move = a_move()
    with gunicorn(tmp_path, workers=1, LOG_FORMAT="json") as web:
        ids = browse(web, move)
    logged = events(web.log)
    assert SECRET not in web.log.read_text()
    master = [e for e in logged if e["logger"] == "gunicorn.error"]
    assert any(e["message"].startswith("Booting worker") for e in master), master
    requests = {e["request_id"]: e for e in logged if e["logger"] == "portal.request"}
    home = requests["req-abc-123"]
    assert home["user"] == "vera" and home["level"] == "INFO"
    assert (home["method"], home["path"], home["status"], home["view"]) == ("GET", "/", 200, "home")
    assert home["message"].startswith("GET / 200 ")
    assert requests[ids["generated"]]["view"] == "move-list"
    assert requests[ids["move"]]["move_id"] == move.pk
    missing = [e for e in logged if e.get("status") == 404 or "Not Found" in e["message"]]
    assert {e["logger"] for e in missing} == {"portal.request", "django.request"}
    assert all("password=***" in e["message"] for e in missing), missing
    assert "user" not in requests[missing[0]["request_id"]]  # nobody signed in
    assert not [e for e in logged if e["logger"] == "gunicorn.access"]  # said once, above


def test_the_web_logs_readable_lines_in_text(tmp_path: Path) -> None:
    move = a_move()
    with gunicorn(tmp_path, workers=1, LOG_FORMAT="text") as web:
        ids = browse(web, move)
    text = web.log.read_text()
    assert SECRET not in text
    assert re.search(
        r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO portal\.request "
        r"\[request_id=req-abc-123 user=vera\] GET / 200 \d+ms$",
        text,
        re.MULTILINE,
    ), text
    assert f"[request_id={ids['move']} user=vera move_id={move.pk}] GET /moves/{move.pk}/" in text
    assert "WARNING django.request [request_id=" in text  # logged after the middleware
    assert "Not Found: /x/password=***" in text
    assert not any(line.lstrip().startswith("{") for line in text.splitlines())


def run_a_move_and_a_bad_message(
    cluster: Kubesim, tmp_path: Path, log_format: str
) -> tuple[Path, int]:
    """A worker in `log_format` runs a move; then it is sent a message for a task it does not
    know, whose argument holds a password: Celery logs the whole message body."""
    inventory_sync()
    move = request_move(["a100-reserve-001"], "training")
    with celery_worker(tmp_path, name=f"logs-{log_format}", LOG_FORMAT=log_format) as worker:
        approve(move)
        move = wait_for_state(move, FINAL)
        assert move.state == MoveRequest.State.SUCCEEDED
        app.send_task("pools.tasks.no_such_task", args=[f"redis://:{SECRET}@cache:6379/0"])
        wait_for(lambda: "no_such_task" in worker.log.read_text(), timeout=30, what="the refusal")
    return worker.log, move.pk


def test_the_worker_logs_json_events_with_the_move_and_the_task(
    cluster: Kubesim, redis: RedisServer, tmp_path: Path
) -> None:
    log, move_id = run_a_move_and_a_bad_message(cluster, tmp_path, "json")
    assert SECRET not in log.read_text()
    logged = events(log)  # the start-up banner too: no line that is not an event
    assert any(e["message"].endswith(" ready.") for e in logged)
    done = [e for e in logged if "succeeded in" in e["message"]]
    by_task = {e["task_name"]: e for e in done}
    for task in ("pools.tasks.execute_move", "pools.tasks.execute_move_items"):
        assert by_task[task]["move_id"] == move_id, by_task
        assert by_task[task]["task_id"] in by_task[task]["message"]
    refused = [e for e in logged if "no_such_task" in e["message"]]
    assert refused and refused[0]["level"] == "ERROR"
    assert "redis://:***@cache:6379/0" in json.dumps(refused)


def test_the_worker_logs_readable_lines_in_text(
    cluster: Kubesim, redis: RedisServer, tmp_path: Path
) -> None:
    log, move_id = run_a_move_and_a_bad_message(cluster, tmp_path, "text")
    text = log.read_text()
    assert SECRET not in text
    assert "redis://:***@cache:6379/0" in text
    assert re.search(
        rf"INFO celery\.app\.trace \[move_id={move_id} task_id=[0-9a-f-]+ "
        r"task_name=pools\.tasks\.execute_move_items\] Task pools\.tasks\.execute_move_items\[",
        text,
    ), text
