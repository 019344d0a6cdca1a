"""Notifications: who learns what, by e-mail (Django's locmem backend) and by webhook; the
workflow's events announce them after commit; delivery never holds up a move."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core import mail
from django.dispatch import receiver
from django.utils import timezone

from pools import moves, tasks
from pools.common.events import move_event
from pools.core.notices import Audience, Event, MoveFacts, notice
from pools.models import MoveRequest, Node, Pool
from pools.moves.notifications import notification_email
from pools.notify.errors import NotificationFailed
from portal.env import EnvError, env_email
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

FACTS = MoveFacts(
    id=7,
    kind="move",
    state="partially failed",
    destination="training",
    requested_by="rita",
    reason="launch",
    nodes=1,
    loan_until=datetime(2030, 1, 2, 3, 4, tzinfo=UTC),
    last_comment="not now",
    url="https://portal.example.com/moves/7/",
)


@pytest.mark.parametrize(
    ("event", "audience", "says"),
    [
        (Event.REQUESTED, Audience.APPROVERS, "asked by rita, waits for approval. Reason: launch"),
        (Event.APPROVED, Audience.REQUESTER, "is approved and runs now"),
        (Event.REJECTED, Audience.REQUESTER, "is rejected: not now"),
        (Event.EXPIRED, Audience.REQUESTER, "expired: nobody decided on it in time"),
        (Event.FINISHED, Audience.REQUESTER, "finished: partially failed."),
        (Event.LOAN_ENDING, Audience.REQUESTER, "ends at 2030-01-02 03:04 UTC"),
    ],
)
def test_each_event_tells_its_audience(event: Event, audience: Audience, says: str) -> None:
    note = notice(event, FACTS)
    assert note.audience is audience
    assert "Move #7 (move, 1 node to training)" in note.text and says in note.text
    assert note.text.endswith("\nhttps://portal.example.com/moves/7/")


@pytest.fixture
def announced() -> Iterator[list[tuple[int, str]]]:
    """What the workflow announces, as a listener of the signal sees it."""
    seen: list[tuple[int, str]] = []

    @receiver(move_event, weak=False)
    def listen(sender: Any, request_id: int, event: str, **kwargs: Any) -> None:
        seen.append((request_id, event))

    yield seen
    move_event.disconnect(listen)


def _ask(loan_until: datetime | None = None) -> MoveRequest:
    return moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=Pool.objects.get(name="training"),
        reason="launch",
        loan_until=loan_until,
        now=timezone.now(),
    )


@pytest.mark.django_db
def test_the_workflow_announces_after_commit(
    announced: list[tuple[int, str]],
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    demo_inventory()
    with django_capture_on_commit_callbacks(execute=True):
        move = _ask()
        assert announced == []  # nothing before the commit
    with django_capture_on_commit_callbacks(execute=True):
        moves.move_reject(
            request=move, approver=user_in("approvers"), reason="no", now=timezone.now()
        )
    with django_capture_on_commit_callbacks(execute=True):
        other = moves.move_request_create(
            requested_by=user_in("requesters", "rita"),
            node_names=["a100-reserve-001"],
            destination=Pool.objects.get(name="training"),
            reason="launch",
            now=timezone.now(),
        )
        moves.moves_expire(now=timezone.now() + timedelta(days=365))
    assert announced == [
        (move.pk, "requested"),
        (move.pk, "rejected"),
        (other.pk, "requested"),
        (other.pk, "expired"),
    ]


@pytest.mark.django_db
def test_a_loan_owner_is_told_once_per_end(
    announced: list[tuple[int, str]],
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    demo_inventory()
    now = timezone.now()
    loan = _ask(loan_until=now + timedelta(hours=3))
    MoveRequest.objects.filter(pk=loan.pk).update(state=MoveRequest.State.SUCCEEDED)
    announced.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert moves.loans_ending_announce(now=now) == []  # three hours left
        later = now + timedelta(hours=2, minutes=30)
        assert moves.loans_ending_announce(now=later) == [loan.pk]
        assert moves.loans_ending_announce(now=later) == []  # told already
    assert announced == [(loan.pk, "loan_ending")]
    loan.refresh_from_db()
    moves.loan_change(
        loan=loan,
        approver=user_in("approvers"),
        until=now + timedelta(hours=5),
        reason="more",
        now=later,
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert moves.loans_ending_announce(now=later) == []
        assert moves.loans_ending_announce(now=now + timedelta(hours=4, minutes=30)) == [loan.pk]


@pytest.mark.django_db
def test_email_goes_to_each_approver_but_the_requester(settings) -> None:  # type: ignore[no-untyped-def]
    settings.PORTAL_URL = "https://portal.example.com"
    demo_inventory()
    for role, name, email in (
        ("approvers", "abe", "abe@example.com"),
        ("approvers", "ann", ""),  # no address: skipped
        ("pool-admins", "pat", "pat@example.com"),
        ("viewers", "vic", "vic@example.com"),  # may not approve
    ):
        user = user_in(role, name)
        user.email = email
        user.save()
    rita = user_in("requesters", "rita")
    rita.email = "rita@example.com"
    rita.save()
    rita.groups.add(user_in("approvers", "abe").groups.get())  # an approver too
    move = _ask()
    tasks.notify_email.apply(args=("requested", move.pk))
    assert sorted(m.to[0] for m in mail.outbox) == ["abe@example.com", "pat@example.com"]
    assert all(len(m.to) == 1 for m in mail.outbox)  # nobody sees another's address
    message = mail.outbox[0]
    assert message.subject == f"Move #{move.pk} (move, 1 node to training) waits for your approval"
    assert f"https://portal.example.com/moves/{move.pk}/" in message.body
    assert message.from_email == settings.DEFAULT_FROM_EMAIL

    mail.outbox.clear()
    moves.move_reject(
        request=move, approver=user_in("approvers", "abe"), reason="not now", now=timezone.now()
    )
    tasks.notify_email.apply(args=("rejected", move.pk))
    assert [(m.to, m.subject) for m in mail.outbox] == [
        (["rita@example.com"], f"Move #{move.pk} (move, 1 node to training) is rejected")
    ]
    assert "is rejected: not now" in mail.outbox[0].body


@pytest.mark.django_db
def test_nothing_is_enqueued_when_both_channels_are_off(
    settings,  # type: ignore[no-untyped-def]
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    """Off by default: no broker is needed (none runs in this test) and nothing is sent."""
    assert settings.NOTIFY_EMAIL is False and settings.NOTIFY_WEBHOOK_URL is None
    demo_inventory()
    with django_capture_on_commit_callbacks(execute=True):
        move = _ask()
    assert MoveRequest.objects.get(pk=move.pk).state == MoveRequest.State.PENDING
    assert Node.objects.filter(move_items__request=move).count() == 1


def test_the_sender_address_is_checked_at_start_up() -> None:
    assert env_email("NOTIFY_FROM_EMAIL", "x@y", {"NOTIFY_FROM_EMAIL": "GPU <gpu@example.com>"})
    with pytest.raises(EnvError, match=r"^NOTIFY_FROM_EMAIL: expected an address"):
        env_email("NOTIFY_FROM_EMAIL", "x@y", {"NOTIFY_FROM_EMAIL": "gpu-portal"})


@pytest.mark.django_db
def test_an_unreachable_mail_server_is_a_transient_failure(settings) -> None:  # type: ignore[no-untyped-def]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = (
        "127.0.0.1",
        _closed_port(),
        1,
    )
    demo_inventory()
    approver = user_in("approvers", "abe")
    approver.email = "abe@example.com"
    approver.save()
    move = _ask()
    with pytest.raises(NotificationFailed) as failed:
        notification_email(event="requested", request_id=move.pk)
    assert failed.value.transient and "ConnectionRefusedError" in str(failed.value)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends
