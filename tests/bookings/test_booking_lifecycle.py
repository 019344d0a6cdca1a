"""A booking over time, with the clock given to each tick (no cluster: the loan's execution is
tested with a worker in tests/e2e/test_bookings_e2e.py): told a day and an hour ahead, a loan
at its start through the move's own checks, a start the beat missed made late with the delay
recorded, a start blocked while its nodes are not free (told once, tried again), missed when
its window passes, expired when never approved, and a cancel after the start ending the loan
now."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pools import bookings, moves
from pools.models import AuditEvent, Booking, MoveRequest, Pool
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
START = (timezone.now() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
END = START + timedelta(days=1)
NODES = ["a100-reserve-003", "a100-reserve-004"]


@pytest.fixture
def told(django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    """The events announced, as (booking, event)."""
    from pools.common.events import booking_event

    seen: list[tuple[int, str]] = []

    def listen(sender: object, booking_id: int, event: str, **kwargs: object) -> None:
        seen.append((booking_id, event))

    booking_event.connect(listen)
    yield seen
    booking_event.disconnect(listen)


@pytest.fixture(autouse=True)
def demo(settings):  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = ""
    demo_inventory()


def approved(**options: object) -> Booking:
    values: dict[str, object] = {
        "user": user_in("requesters", "rita"),
        "source": Pool.objects.get(name="mixed"),
        "destination": Pool.objects.get(name="training"),
        "team": "vision",
        "node_names": NODES,
        "starts_at": START,
        "ends_at": END,
        "reason": "evaluation run",
        "now": timezone.now(),
    }
    values.update(options)
    booking = bookings.booking_ask(**values)  # type: ignore[arg-type]
    return bookings.booking_approve(
        booking.pk, approver=user_in("approvers", "arno"), now=timezone.now()
    )


def tick(at, django_capture_on_commit_callbacks) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    with django_capture_on_commit_callbacks(execute=True):
        return bookings.bookings_advance(now=at)


def test_told_a_day_then_an_hour_ahead_then_lent_at_its_start(
    told,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    booking = approved()
    assert tick(START - timedelta(days=2), django_capture_on_commit_callbacks)["told"] == []
    assert tick(START - timedelta(hours=20), django_capture_on_commit_callbacks)["told"] == [
        booking.pk
    ]
    assert tick(START - timedelta(hours=19), django_capture_on_commit_callbacks)["told"] == []
    assert tick(START - timedelta(minutes=30), django_capture_on_commit_callbacks)["told"] == [
        booking.pk
    ]
    assert [e for _, e in told] == ["day_ahead", "hour_ahead"]

    done = tick(START + timedelta(seconds=5), django_capture_on_commit_callbacks)
    assert done["started"] == [booking.pk]
    booking.refresh_from_db()
    loan = booking.loan
    assert booking.state == "started" and booking.start_delay_seconds == 5
    assert (loan.state, loan.loan_until, loan.requested_by.username) == ("approved", END, "rita")
    assert sorted(i.node.name for i in loan.items.all()) == NODES
    assert [a.approver.username for a in loan.approvals.all()] == ["arno"]
    started = AuditEvent.objects.get(booking=booking, action="booking.started")
    assert "late" not in started.message and started.request_id == loan.pk
    assert tick(START + timedelta(seconds=40), django_capture_on_commit_callbacks)["started"] == []
    assert told[-1] == (booking.pk, "started")


def test_a_start_the_beat_missed_is_made_late_and_the_delay_recorded(
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    booking = approved()
    tick(START + timedelta(minutes=10), django_capture_on_commit_callbacks)
    booking.refresh_from_db()
    assert booking.state == "started" and booking.start_delay_seconds == 600
    started = AuditEvent.objects.get(booking=booking, action="booking.started")
    assert started.message.endswith(", 10 min late: the beat was not running at its start")


def test_a_start_blocked_by_another_move_is_told_once_and_tried_again(
    told,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    booking = approved()
    other = moves.move_request_create(
        requested_by=user_in("requesters", "sam"),
        node_names=[NODES[0]],
        destination=Pool.objects.get(name="inference"),
        reason="serving",
        now=timezone.now(),
    )
    for seconds in (1, 31, 61):
        assert tick(START + timedelta(seconds=seconds), django_capture_on_commit_callbacks)[
            "blocked"
        ] == [booking.pk]
    booking.refresh_from_db()
    assert booking.state == "approved" and booking.loan is None
    assert f"already has an active move (#{other.pk})" in booking.start_blocked
    assert [e for _, e in told].count("start_blocked") == 1
    assert AuditEvent.objects.filter(booking=booking, action="booking.start_blocked").count() == 1

    moves.move_cancel(request=other, user=user_in("requesters", "sam"), now=timezone.now())
    tick(START + timedelta(seconds=91), django_capture_on_commit_callbacks)
    booking.refresh_from_db()
    assert booking.state == "started" and booking.start_blocked == ""


def test_missed_when_its_window_passes_and_expired_when_never_approved(
    told,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    blocked = approved()
    moves.move_request_create(
        requested_by=user_in("requesters", "sam"),
        node_names=[NODES[1]],
        destination=Pool.objects.get(name="inference"),
        reason="serving",
        now=timezone.now(),
    )
    pending = bookings.booking_ask(
        user=user_in("requesters", "rita"),
        source=Pool.objects.get(name="mixed"),
        destination=Pool.objects.get(name="training"),
        node_names=["a100-reserve-008"],
        starts_at=START,
        ends_at=END,
        reason="later run",
        now=timezone.now(),
    )
    done = tick(START + timedelta(seconds=1), django_capture_on_commit_callbacks)
    assert done["expired"] == [pending.pk] and done["blocked"] == [blocked.pk]
    done = tick(END, django_capture_on_commit_callbacks)
    assert done["missed"] == [blocked.pk]
    blocked.refresh_from_db()
    assert blocked.state == "missed" and blocked.finished_at == END
    assert (blocked.pk, "missed") in told and (pending.pk, "expired") in told


def test_cancelling_after_the_start_ends_the_loan_now(
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    booking = approved()
    tick(START, django_capture_on_commit_callbacks)
    booking.refresh_from_db()
    at = START + timedelta(hours=3)
    booking = bookings.booking_cancel(
        booking.pk, user=user_in("requesters", "rita"), reason="done early", now=at
    )
    loan = MoveRequest.objects.get(pk=booking.loan_id)
    assert loan.loan_until == at
    assert AuditEvent.objects.filter(request=loan, action="loan.ended_early").exists()
    assert AuditEvent.objects.filter(booking=booking, action="booking.ended_early").exists()


def test_who_is_told_what(settings) -> None:  # type: ignore[no-untyped-def]
    from django.core import mail

    from pools.bookings.notifications import booking_email

    people = {}
    for role, name in (("requesters", "rita"), ("approvers", "arno"), ("viewers", "vera")):
        people[name] = user_in(role, name)
        people[name].email = f"{name}@example.com"
        people[name].save()
    booking = approved()
    Booking.objects.filter(pk=booking.pk).update(start_blocked="move #9 holds a100-reserve-003")
    assert booking_email(event="requested", booking_id=booking.pk) == 1
    assert mail.outbox[-1].to == ["arno@example.com"]
    assert booking_email(event="hour_ahead", booking_id=booking.pk) == 1
    assert mail.outbox[-1].to == ["rita@example.com"]
    assert mail.outbox[-1].subject == f"Booking #{booking.pk} of mixed: starts within the hour"
    assert booking_email(event="start_blocked", booking_id=booking.pk) == 2
    assert "What stops it: move #9 holds a100-reserve-003" in mail.outbox[-1].body
