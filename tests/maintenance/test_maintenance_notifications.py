"""What a maintenance's notifications say and to whom: the one who started it and every pool
admin by e-mail (each their own message), and the webhook's JSON with the event; both
channels only when configured."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail

from pools.maintenance import waves
from pools.maintenance.notifications import maintenance_email, maintenance_webhook
from pools.models import Maintenance, Pool
from pools.notify import configured_channels as channels
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def held(settings) -> Maintenance:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = ""
    settings.PORTAL_URL = "https://portal.example.com"
    demo_inventory()
    starter = user_in("pool-admins", "paula")
    starter.email = "paula@example.com"
    starter.save()
    other = user_in("pool-admins", "pierre")
    other.email = "pierre@example.com"
    other.save()
    viewer = user_in("viewers", "vera")
    viewer.email = "vera@example.com"
    viewer.save()
    User.objects.create_user("gone", email="gone@example.com", is_active=False)
    maintenance = waves.maintenance_start(
        pool=Pool.objects.get(name="mixed"),
        user=starter,
        reason="driver 570",
        wave_size=1,
        step="driver upgraded",
        nodes=["a100-reserve-000"],
    )
    Maintenance.objects.filter(pk=maintenance.pk).update(
        wave=1, waiting="wave 1 drained: waiting for 'driver upgraded' to be confirmed"
    )
    return maintenance


def test_the_pool_admins_get_an_email_each(held: Maintenance) -> None:
    assert maintenance_email(event="held", maintenance_id=held.pk) == 2
    assert sorted(m.to[0] for m in mail.outbox) == ["paula@example.com", "pierre@example.com"]
    message = mail.outbox[0]
    assert message.subject == (
        f"Maintenance #{held.pk} of mixed: a wave is drained and waits for its step"
    )
    assert "wave 1 drained: waiting for 'driver upgraded' to be confirmed" in message.body
    assert f"https://portal.example.com/maintenance/{held.pk}/" in message.body


def test_the_webhook_gets_the_event(held: Maintenance, settings) -> None:  # type: ignore[no-untyped-def]
    received: list[dict[str, Any]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            """Quiet: the test reads what was posted, not the server's log."""

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        settings.NOTIFY_WEBHOOK_URL = f"http://127.0.0.1:{server.server_port}/hook"
        assert "webhook" in channels()
        maintenance_webhook(event="held", maintenance_id=held.pk)
    finally:
        server.shutdown()
    (body,) = received
    assert (body["event"], body["maintenance"], body["pool"], body["wave"]) == (
        "maintenance.held",
        held.pk,
        "mixed",
        1,
    )
    assert body["text"].startswith(f"Maintenance #{held.pk} of mixed: a wave is drained")


def test_no_channel_when_none_is_configured(settings) -> None:  # type: ignore[no-untyped-def]
    settings.NOTIFY_EMAIL = False
    settings.NOTIFY_WEBHOOK_URL = None
    assert channels() == []
