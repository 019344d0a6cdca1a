"""Who may do what to a move: allowed_actions says it, every transition enforces the same."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from pools import moves
from pools.common.errors import InvalidMove, NotAllowed, Refused
from pools.models import MoveRequest, Node, Pool
from pools.moves import Action, allowed_actions
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

APPROVE, REJECT, CANCEL, END, EXTEND = (
    Action.APPROVE,
    Action.REJECT,
    Action.CANCEL,
    Action.END_LOAN,
    Action.EXTEND_LOAN,
)


@pytest.fixture
def nodes(db) -> dict[str, Node]:  # type: ignore[no-untyped-def]
    return demo_inventory()


def ask(node: str, user: User, **options) -> MoveRequest:  # type: ignore[no-untyped-def]
    return moves.move_request_create(
        requested_by=user,
        node_names=[node],
        destination=Pool.objects.get(name=options.pop("destination", "shared")),
        reason="why not",
        now=timezone.now(),
        **options,
    )


def people() -> dict[str, User]:
    return {
        "requester": user_in("requesters", "rita"),
        "other requester": user_in("requesters", "ravi"),
        "approver": user_in("approvers", "arno"),
        "viewer": user_in("viewers", "vera"),
        "pool admin": user_in("pool-admins", "pat"),
    }


@pytest.mark.django_db
def test_what_each_role_may_do_to_a_pending_move(nodes: dict[str, Node]) -> None:
    who = people()
    move = ask("a100-reserve-000", who["requester"])
    admins_own = ask("a100-reserve-001", who["pool admin"])
    assert {name: allowed_actions(user, move) for name, user in who.items()} == {
        "requester": {CANCEL},
        "other requester": set(),
        "approver": {APPROVE, REJECT},
        "viewer": set(),
        "pool admin": {APPROVE, REJECT, CANCEL},
    }
    # Four eyes: whoever asked does not decide, even with every permission.
    assert allowed_actions(who["pool admin"], admins_own) == {CANCEL}
    assert allowed_actions(who["approver"], admins_own) == {APPROVE, REJECT}


@pytest.mark.django_db
def test_a_loan_adds_ending_and_extending_for_approvers_only(nodes: dict[str, Node]) -> None:
    who = people()
    loan = ask("a100-reserve-000", who["requester"], loan_until=timezone.now() + timedelta(hours=4))
    assert allowed_actions(who["approver"], loan) == {APPROVE, REJECT, END, EXTEND}
    assert allowed_actions(who["requester"], loan) == {CANCEL}
    MoveRequest.objects.filter(pk=loan.pk).update(state=MoveRequest.State.SUCCEEDED)
    loan.refresh_from_db()
    assert allowed_actions(who["approver"], loan) == {END, EXTEND}
    moves.loans_return_due(now=timezone.now() + timedelta(hours=5))
    loan.refresh_from_db()
    assert allowed_actions(who["approver"], loan) == set()  # on its way back


@pytest.mark.django_db
@pytest.mark.parametrize("action", list(Action))
def test_an_action_works_exactly_when_it_is_allowed(nodes: dict[str, Node], action: Action) -> None:
    """For every person and every action: move_decide succeeds when allowed_actions offers
    the action, and is refused otherwise."""
    who = people()
    soon = timezone.now() + timedelta(hours=4)
    for name, user in who.items():
        with transaction.atomic():
            move = ask("a100-reserve-000", who["requester"], loan_until=soon)
            offered = action in allowed_actions(user, move)
            try:
                moves.move_decide(
                    move=move,
                    user=user,
                    action=action,
                    reason="because",
                    until=soon + timedelta(hours=1),
                    now=timezone.now(),
                )
                done = True
            except NotAllowed:
                done = False
            assert done == offered, (name, action)
            transaction.set_rollback(True)


@pytest.mark.django_db
def test_a_decided_move_offers_nothing_and_refuses_with_its_state(nodes: dict[str, Node]) -> None:
    who = people()
    move = ask("a100-reserve-000", who["requester"])
    moves.move_decide(
        move=move, user=who["approver"], action=REJECT, reason="no", now=timezone.now()
    )
    assert all(allowed_actions(user, move) == set() for user in who.values())
    with pytest.raises(Refused) as caught:
        moves.move_decide(move=move, user=who["requester"], action=CANCEL, now=timezone.now())
    assert caught.value.code == "state_conflict"


@pytest.mark.django_db
def test_rejecting_ones_own_request_is_refused(nodes: dict[str, Node]) -> None:
    admin = user_in("pool-admins", "pat")
    move = ask("a100-reserve-000", admin)
    with pytest.raises(NotAllowed) as caught:
        moves.move_decide(move=move, user=admin, action=REJECT, reason="x", now=timezone.now())
    assert caught.value.code == "self_approval"
    assert "cancel it instead" in caught.value.message


@pytest.mark.django_db
def test_extending_a_loan_needs_the_new_end(nodes: dict[str, Node]) -> None:
    # The loans page once read a missing date as "end now".
    loan = ask(
        "a100-reserve-000",
        user_in("requesters", "rita"),
        loan_until=timezone.now() + timedelta(hours=4),
    )
    with pytest.raises(InvalidMove) as caught:
        moves.move_decide(
            move=loan,
            user=user_in("approvers", "arno"),
            action=EXTEND,
            reason="longer",
            now=timezone.now(),
        )
    assert "loan_until" in caught.value.fields
    loan.refresh_from_db()
    assert loan.loan_until > timezone.now()
