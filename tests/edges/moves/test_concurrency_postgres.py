"""Races in the workflow, with threads released together by a barrier: exactly one winner.

The race tests run on the session's database (SQLite, whose IMMEDIATE transactions take
the write lock at BEGIN), and again on PostgreSQL where one is reachable: there
READ COMMITTED lets two transactions read the same row at once, and only
`select_for_update`, the compare-and-swap updates and the one-active-move-per-node
constraint keep the winner single. `test_the_races_on_postgresql` runs this module in a
fresh pytest process with DATABASE_URL pointing at PostgreSQL and its own Redis.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis as redis_client
from django.conf import settings
from django.db import connection
from django.utils import timezone

from pools import bookings, moves
from pools.common.errors import Refused
from pools.models import AuditEvent, Booking, MoveItem, MoveRequest, Node, Pool
from tests.moves_helpers import user_in
from tests.postgres_rerun import rerun_on_postgresql, rerunning_on_postgres
from tests.servers import RedisServer

ROUNDS = 5  # each race is run this many times, on fresh rows
State = MoveRequest.State
races = pytest.mark.django_db(transaction=True)


def race(*contenders: Callable[[], Any]) -> list[str]:
    """Run the contenders in threads that start together; each outcome is "won" or the
    refusal's code, in the contenders' order."""
    barrier = threading.Barrier(len(contenders))
    outcomes = [""] * len(contenders)

    def run(index: int, contender: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=30)
            contender()
            outcomes[index] = "won"
        except Refused as exc:
            outcomes[index] = exc.code
        except Exception as exc:  # reported, not swallowed: a crash is not a refusal
            outcomes[index] = f"crashed: {exc!r}"
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def queued_executions(redis: RedisServer) -> list[int]:
    """The execute_move messages waiting in the broker (then removed): what the approvals
    handed to the worker."""
    client = redis_client.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        raw = client.lrange("celery", 0, -1)
        client.delete("celery")
    finally:
        client.close()
    headers = [json.loads(message)["headers"] for message in raw]
    return [
        int(header["argsrepr"].strip("(),"))
        for header in headers
        if header["task"] == "pools.tasks.execute_move"
    ]


@pytest.fixture
def destination() -> Pool:
    if rerunning_on_postgres():
        assert connection.vendor == "postgresql"  # the driver below asked for it
    pool = Pool.objects.get(name="mixed")
    pool.requires_healthy_nodes = False
    pool.accepted_gpu_models = []
    pool.save()
    return pool


def gpu_node(name: str) -> Node:
    return Node.objects.create(
        name=name,
        gpu_model="NVIDIA-A100-SXM4-80GB",
        gpu_count=8,
        gpu_allocatable=8,
        ready=True,
        last_seen=timezone.now(),
    )


def ask(node: str, destination: Pool, requester: Any = None) -> MoveRequest:
    return moves.move_request_create(
        requested_by=requester or user_in("requesters", "rita"),
        node_names=[node],
        destination=destination,
        reason="race",
        now=timezone.now(),
    )


@races
def test_two_approvers_at_once_approve_once(destination: Pool, redis: RedisServer) -> None:
    first, second = user_in("approvers", "a1"), user_in("approvers", "a2")
    queued_executions(redis)  # start from an empty queue
    for round_ in range(ROUNDS):
        move = ask(gpu_node(f"gpu-approve-{round_}").name, destination)
        outcomes = race(
            lambda m=move: moves.move_approve(request=m, approver=first, now=timezone.now()),
            lambda m=move: moves.move_approve(request=m, approver=second, now=timezone.now()),
        )
        assert sorted(outcomes) == ["state_conflict", "won"]
        move.refresh_from_db()
        assert move.state == State.APPROVED
        assert move.approvals.count() == 1
        assert AuditEvent.objects.filter(request=move, action="move.fully_approved").count() == 1
        assert queued_executions(redis) == [move.pk]


@races
def test_the_last_two_of_two_approvals_at_once_approve_once(
    destination: Pool, redis: RedisServer
) -> None:
    # Each counts the approvals after adding its own: without the row lock, both could
    # count one of two and the move would wait forever.
    destination.approvals_required = 2
    destination.save()
    first, second = user_in("approvers", "a1"), user_in("approvers", "a2")
    queued_executions(redis)
    for round_ in range(ROUNDS):
        move = ask(gpu_node(f"gpu-two-{round_}").name, destination)
        outcomes = race(
            lambda m=move: moves.move_approve(request=m, approver=first, now=timezone.now()),
            lambda m=move: moves.move_approve(request=m, approver=second, now=timezone.now()),
        )
        assert outcomes == ["won", "won"]
        move.refresh_from_db()
        assert move.state == State.APPROVED
        assert AuditEvent.objects.filter(request=move, action="move.fully_approved").count() == 1
        assert queued_executions(redis) == [move.pk]


@races
def test_two_requests_for_one_node_at_once_create_one(destination: Pool) -> None:
    rita, ravi = user_in("requesters", "rita"), user_in("requesters", "ravi")
    for round_ in range(ROUNDS):
        node = gpu_node(f"gpu-ask-{round_}").name
        outcomes = race(
            lambda n=node: ask(n, destination, rita),
            lambda n=node: ask(n, destination, ravi),
        )
        assert sorted(outcomes) == ["active_move", "won"]
        assert MoveRequest.objects.filter(items__node__name=node).count() == 1
        assert MoveItem.objects.filter(node__name=node, active=True).count() == 1


@races
def test_approve_racing_cancel_has_one_winner(destination: Pool, redis: RedisServer) -> None:
    rita, approver = user_in("requesters", "rita"), user_in("approvers", "a1")
    queued_executions(redis)
    for round_ in range(ROUNDS):
        move = ask(gpu_node(f"gpu-cancel-{round_}").name, destination, rita)
        approve, cancel = race(
            lambda m=move: moves.move_approve(request=m, approver=approver, now=timezone.now()),
            lambda m=move: moves.move_cancel(request=m, user=rita, now=timezone.now()),
        )
        assert sorted([approve, cancel]) == ["state_conflict", "won"]
        move.refresh_from_db()
        if approve == "won":
            assert move.state == State.APPROVED
            assert move.items.filter(active=True).count() == 1
            assert queued_executions(redis) == [move.pk]
        else:
            assert move.state == State.CANCELLED
            assert not move.approvals.exists()
            assert not move.items.filter(active=True).exists()
            assert queued_executions(redis) == []


BOOKING_ROUNDS = 8


def _booked_nodes(round_: int) -> list[str]:
    pool = Pool.objects.get(name="mixed")
    names = [f"gpu-race-{round_}-{i}" for i in range(2)]
    for name in names:
        Node.objects.create(
            name=name,
            pool=pool,
            pool_label="mixed",
            gpu_model="NVIDIA-A100-SXM4-80GB",
            gpu_count=8,
            gpu_allocatable=8,
            ready=True,
            last_seen=timezone.now(),
        )
    return names


@races
def test_two_conflicting_bookings_approved_at_once_hold_one_window() -> None:
    """Both bookings read the other as pending at once under READ COMMITTED; only the lock
    on the source pool's row keeps the winner single (the second is refused the conflict)."""
    if rerunning_on_postgres():
        assert connection.vendor == "postgresql"
    source, destination = Pool.objects.get(name="mixed"), Pool.objects.get(name="training")
    first, second = user_in("approvers", "a1"), user_in("approvers", "a2")
    start = timezone.now() + timedelta(days=1)
    for round_ in range(BOOKING_ROUNDS):
        nodes = _booked_nodes(round_)
        asked = [
            bookings.booking_ask(
                user=user_in("requesters", f"r{i}"),
                source=source,
                destination=destination,
                node_names=nodes,
                starts_at=start + timedelta(hours=i),
                ends_at=start + timedelta(hours=10 + i),
                reason="race",
                now=timezone.now(),
            )
            for i in range(2)
        ]
        outcomes = race(
            lambda b=asked[0]: bookings.booking_approve(b.pk, approver=first, now=timezone.now()),
            lambda b=asked[1]: bookings.booking_approve(b.pk, approver=second, now=timezone.now()),
        )
        assert sorted(outcomes) == ["booking_nodes", "won"], outcomes
        states = sorted(
            Booking.objects.filter(pk__in=[b.pk for b in asked]).values_list("state", flat=True)
        )
        assert states == ["approved", "pending"]
        approved_events = AuditEvent.objects.filter(
            booking__in=asked, action="booking.approved"
        ).count()
        assert approved_events == 1


def test_the_races_on_postgresql() -> None:
    rerun_on_postgresql(__file__, "test_the_races_on_postgresql", expected_passed=5)
