"""A loan whose return leaves nodes lent (issue 25, R9): flagged on its page, on the loans
page and in the pool's readiness, told to its owner and the approvers once, and tried
again with a doubling delay until every node is back. Over rows: no cluster, no worker."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core import mail
from django.dispatch import receiver
from django.test import Client
from django.utils import timezone

from pools import moves, tasks
from pools.common.events import move_event
from pools.insights import gather
from pools.models import AuditEvent, MoveItem, MoveRequest, Node, Pool
from pools.moves.loan_returns import loan_retry_delay
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

State = MoveRequest.State
NAMES = ["a100-reserve-000", "a100-reserve-001"]


@pytest.fixture
def announced() -> Iterator[list[tuple[int, str]]]:
    seen: list[tuple[int, str]] = []

    @receiver(move_event, weak=False)
    def listen(sender: Any, request_id: int, event: str, **kwargs: Any) -> None:
        seen.append((request_id, event))

    yield seen
    move_event.disconnect(listen)


def lent(now: datetime) -> MoveRequest:
    """Both nodes lent from mixed to shared until `now`, as a worker would have recorded."""
    demo_inventory()
    loan = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=NAMES,
        destination=Pool.objects.get(name="shared"),
        reason="burst",
        now=now - timedelta(hours=2),
        loan_until=now - timedelta(hours=1),
    )
    Node.objects.filter(name__in=NAMES).update(
        pool=Pool.objects.get(name="shared"), pool_label="shared"
    )
    loan.items.update(state=MoveItem.State.DONE, active=False)
    MoveRequest.objects.filter(pk=loan.pk).update(state=State.SUCCEEDED)
    return loan


def finish(back: MoveRequest, state: str, error: str = "") -> None:
    """What a worker records when a return move ends: its items, and the nodes' pool."""
    back.items.update(state=state, active=False, error=error)
    MoveRequest.objects.filter(pk=back.pk).update(
        state=State.SUCCEEDED if state == MoveItem.State.DONE else State.FAILED
    )
    if state == MoveItem.State.DONE:
        Node.objects.filter(move_items__request=back).update(
            pool=back.destination, pool_label=back.destination.name
        )


def loans_check(now: datetime) -> Any:
    (check,) = [
        c
        for c in gather.pool_readiness(Pool.objects.get(name="shared"), now=now)
        if c.name == "loans"
    ]
    return check


@pytest.mark.django_db
def test_a_blocked_return_is_flagged_told_and_tried_again_until_the_node_is_back(
    announced: list[tuple[int, str]],
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    now = timezone.now()
    loan = lent(now)
    other = moves.move_request_create(
        requested_by=user_in("requesters", "sam"),
        node_names=[NAMES[1]],
        destination=Pool.objects.get(name="inference"),
        reason="other work",
        now=now,
    )
    with django_capture_on_commit_callbacks(execute=True):
        (back,) = moves.loans_return_due(now=now)
    assert [i.node.name for i in back.items.all()] == [NAMES[0]]
    finish(back, MoveItem.State.DONE)
    announced.clear()

    with django_capture_on_commit_callbacks(execute=True):
        assert moves.loans_return_due(now=now + timedelta(seconds=30)) == []
    loan.refresh_from_db()
    assert loan.loan_return_stuck_since is not None and loan.loan_returned_at is None
    assert loan.loan_return_left == [{"node": NAMES[1], "why": f"move #{other.pk} holds the node"}]
    assert loan.loan_return_retry_at == now + timedelta(seconds=30) + timedelta(minutes=1)
    assert announced == [(loan.pk, "loan_return_stuck")]
    # Flagged where people look: the loan's page, the loans page, the pool's readiness.
    viewer = Client()
    viewer.force_login(user_in("viewers"))
    page = viewer.get(f"/moves/{loan.pk}/").content.decode()
    assert f'data-loan-stuck="{loan.pk}"' in page and f"move #{other.pk} holds the node" in page
    loans_page = viewer.get("/loans/").content.decode()
    assert f'<tr data-loan="{loan.pk}">' in loans_page and "Return blocked" in loans_page
    check = loans_check(now)
    assert check.status == "fail" and check.concerned == [
        f"move #{loan.pk} (2 nodes): its return left 1 node lent, tried again"
    ]

    # Not before its time; then, the other move gone, the node goes back.
    with django_capture_on_commit_callbacks(execute=True):
        assert moves.loans_return_due(now=now + timedelta(seconds=60)) == []
    moves.move_cancel(request=other, user=user_in("requesters", "sam"), now=now)
    with django_capture_on_commit_callbacks(execute=True):
        (again,) = moves.loans_return_due(now=now + timedelta(minutes=2))
    assert [i.node.name for i in again.items.all()] == [NAMES[1]]
    assert again.parent_id == loan.pk and again.destination.name == "mixed"
    finish(again, MoveItem.State.DONE)
    with django_capture_on_commit_callbacks(execute=True):
        assert moves.loans_return_due(now=now + timedelta(minutes=3)) == []
    loan.refresh_from_db()
    assert loan.loan_returned_at is not None and loan.loan_return_stuck_since is None
    assert AuditEvent.objects.filter(request=loan, action="loan.returned").exists()
    assert announced == [(loan.pk, "loan_return_stuck")]  # told once
    assert loans_check(now).status == "pass"


@pytest.mark.django_db
def test_a_failed_return_is_tried_again_with_a_doubling_delay(
    announced: list[tuple[int, str]],
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    now = timezone.now()
    loan = lent(now)
    (back,) = moves.loans_return_due(now=now)
    finish(back, MoveItem.State.FAILED, "the Kubernetes API stayed unavailable")
    with django_capture_on_commit_callbacks(execute=True):
        moves.loans_return_due(now=now)
    loan.refresh_from_db()
    assert [left["why"] for left in loan.loan_return_left] == [
        "its return failed: the Kubernetes API stayed unavailable"
    ] * 2
    assert loan.loan_return_retry_at == now + timedelta(minutes=1)
    (second,) = moves.loans_return_due(now=now + timedelta(minutes=1))
    assert sorted(i.node.name for i in second.items.all()) == NAMES
    finish(second, MoveItem.State.FAILED, "again")
    with django_capture_on_commit_callbacks(execute=True):
        moves.loans_return_due(now=now + timedelta(minutes=2))
    loan.refresh_from_db()
    assert loan.loan_return_attempts == 2
    assert loan.loan_return_retry_at == now + timedelta(minutes=4)  # 2 min after round 2
    assert announced == [(loan.pk, "loan_return_stuck")]


def test_the_retry_delay_doubles_up_to_an_hour() -> None:
    assert [loan_retry_delay(n).total_seconds() for n in (1, 2, 3, 7, 8, 500)] == [
        60,
        120,
        240,
        3600,
        3600,
        3600,
    ]


@pytest.mark.django_db
def test_the_owner_and_the_approvers_get_the_mail(settings) -> None:  # type: ignore[no-untyped-def]
    now = timezone.now()
    loan = lent(now)
    for role, name in (("requesters", "rita"), ("approvers", "abe")):
        user = user_in(role, name)
        user.email = f"{name}@example.com"
        user.save()
    tasks.notify_email.apply(args=("loan_return_stuck", loan.pk))
    assert sorted(m.to[0] for m in mail.outbox) == ["abe@example.com", "rita@example.com"]
    assert "did not return every node" in mail.outbox[0].subject


@pytest.mark.django_db
def test_a_partly_failed_loan_returns_the_nodes_it_did_move() -> None:
    now = timezone.now()
    loan = lent(now)
    # The second node's change failed: it never left mixed. The loan still lent the first.
    loan.items.filter(node__name=NAMES[1]).update(state=MoveItem.State.FAILED, error="boom")
    Node.objects.filter(name=NAMES[1]).update(
        pool=Pool.objects.get(name="mixed"), pool_label="mixed"
    )
    MoveRequest.objects.filter(pk=loan.pk).update(state=State.PARTIALLY_FAILED)
    (back,) = moves.loans_return_due(now=now)
    assert back.parent_id == loan.pk and back.destination.name == "mixed"
    assert list(back.items.values_list("node__name", flat=True)) == [NAMES[0]]


@pytest.mark.django_db
def test_a_loans_unchanged_nodes_go_back_with_the_others() -> None:
    """A node the loan found already labelled for its pool (someone relabelled it by hand,
    or the answer to the PATCH was lost) was lent all the same: it goes back too."""
    now = timezone.now()
    loan = lent(now)
    loan.items.filter(node__name=NAMES[1]).update(state=MoveItem.State.UNCHANGED)
    (back,) = moves.loans_return_due(now=now)
    assert sorted(back.items.values_list("node__name", flat=True)) == NAMES
