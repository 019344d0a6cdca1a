"""Webhook notifications end to end: the workflow's events reach a real HTTP receiver
through a real Celery worker on a real Redis, retried on a 5xx, given up (and logged) on a
4xx; the move runs to its end either way."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from pools import moves
from pools.inventory import inventory_sync
from pools.models import MoveRequest, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import FINAL, user_in, wait_for_state
from tests.servers import RedisServer, wait_for
from tests.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]


class Receiver:
    """An HTTP endpoint that answers the n-th POST of each event with the n-th status of
    `statuses` (the last one repeats) and keeps the JSON bodies. Counted per event because
    the worker may deliver two events at once: which one arrives first is up to load."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.bodies: list[tuple[int, dict[str, Any]]] = []
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    tries = receiver.events().count(body["event"])
                    status = receiver.statuses[min(tries, len(statuses) - 1)]
                    receiver.bodies.append((status, body))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/secret-key"

    def events(self, status: int | None = None) -> list[str]:
        return [b["event"] for s, b in self.bodies if status is None or s == status]


@pytest.fixture
def receiver_factory() -> Iterator[Any]:
    started: list[Receiver] = []

    def start(statuses: list[int]) -> Receiver:
        receiver = Receiver(statuses)
        threading.Thread(target=receiver.server.serve_forever, daemon=True).start()
        started.append(receiver)
        return receiver

    yield start
    for receiver in started:
        receiver.server.shutdown()


@pytest.fixture
def portal(cluster: Kubesim, redis: RedisServer) -> Kubesim:
    inventory_sync()
    return cluster


def _move_through(tmp_path: Path, settings: Any, hook: Receiver) -> tuple[MoveRequest, str]:
    settings.NOTIFY_WEBHOOK_URL = hook.url  # the web side enqueues, the worker delivers
    worker_env = {"NOTIFY_WEBHOOK_URL": hook.url, "NOTIFY_RETRY_SECONDS": "0.2"}
    with celery_worker(tmp_path, **worker_env) as worker:
        move = moves.move_request_create(
            requested_by=user_in("requesters", "rita"),
            node_names=["a100-reserve-000"],
            destination=Pool.objects.get(name="training"),
            reason="launch",
            now=timezone.now(),
        )
        moves.move_approve(request=move, approver=user_in("approvers"), now=timezone.now())
        move = wait_for_state(move, FINAL)
        # Every event delivered (or refused): the retried one may come after the others.
        wait_for(lambda: len(hook.events(hook.statuses[-1])) >= 3, timeout=30, what="three events")
        return move, worker.log.read_text()


def test_events_reach_the_webhook_and_a_5xx_is_retried(
    portal: Kubesim, tmp_path: Path, settings: Any, receiver_factory: Any
) -> None:
    hook = receiver_factory([503, 200])
    move, _ = _move_through(tmp_path, settings, hook)
    assert move.state == MoveRequest.State.SUCCEEDED
    assert sorted(hook.events(503)) == ["approved", "finished", "requested"]
    assert sorted(hook.events(200)) == ["approved", "finished", "requested"]
    finished = next(b for s, b in hook.bodies if b["event"] == "finished")
    assert finished["move"] == move.pk and finished["state"] == "succeeded"
    assert finished["text"].startswith(f"Move #{move.pk} (move, 1 node to training) finished")


def test_a_refusing_webhook_is_logged_and_the_move_still_runs(
    portal: Kubesim, tmp_path: Path, settings: Any, receiver_factory: Any
) -> None:
    hook = receiver_factory([400])
    move, log = _move_through(tmp_path, settings, hook)
    assert move.state == MoveRequest.State.SUCCEEDED
    assert sorted(hook.events()) == ["approved", "finished", "requested"]  # no retry of a 4xx
    assert f"move #{move.pk} requested: webhook not delivered after 1 tries" in log
    assert "secret-key" not in log  # the webhook's URL is a secret
