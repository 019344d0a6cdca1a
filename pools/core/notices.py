"""What each domain event tells whom: the subject and text of a notification.

Approvers learn that a request waits; requesters that theirs was decided or finished; a
loan's owner that it ends within the hour; both that a loan's return left nodes lent. The
same text goes into an e-mail and into a webhook's JSON ``text`` field (Slack and
Mattermost show it as it is).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class Event(enum.StrEnum):
    REQUESTED = "requested"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    FINISHED = "finished"
    LOAN_ENDING = "loan_ending"
    LOAN_RETURN_STUCK = "loan_return_stuck"


class Audience(enum.StrEnum):
    APPROVERS = "approvers"  # everyone who may approve, the requester aside
    REQUESTER = "requester"  # who asked (a loan's owner)
    EVERYONE = "everyone"  # the requester and the approvers


AUDIENCE = {
    Event.REQUESTED: Audience.APPROVERS,
    Event.APPROVED: Audience.REQUESTER,
    Event.REJECTED: Audience.REQUESTER,
    Event.EXPIRED: Audience.REQUESTER,
    Event.FINISHED: Audience.REQUESTER,
    Event.LOAN_ENDING: Audience.REQUESTER,
    Event.LOAN_RETURN_STUCK: Audience.EVERYONE,
}


@dataclass(frozen=True)
class MoveFacts:
    id: int
    kind: str  # "move", "reconcile", "loan return"
    state: str  # human: "partially failed"
    destination: str
    requested_by: str | None  # None: the system (a loan return)
    reason: str
    nodes: int
    loan_until: datetime | None
    last_comment: str  # the rejection's reason, where there is one
    url: str  # the move's page; relative when the portal's address is not configured


@dataclass(frozen=True)
class Notice:
    event: Event
    audience: Audience
    subject: str
    text: str


def _nodes(count: int) -> str:
    return f"{count} node" + ("" if count == 1 else "s")


def _what(move: MoveFacts) -> str:
    return f"Move #{move.id} ({move.kind}, {_nodes(move.nodes)} to {move.destination})"


def notice(event: Event, move: MoveFacts) -> Notice:
    what = _what(move)
    who = move.requested_by or "the portal"
    if event is Event.REQUESTED:
        subject = f"{what} waits for your approval"
        body = f"{what}, asked by {who}, waits for approval. Reason: {move.reason}"
    elif event is Event.APPROVED:
        subject = f"{what} is approved"
        body = f"{what} is approved and runs now."
    elif event is Event.REJECTED:
        subject = f"{what} is rejected"
        body = f"{what} is rejected: {move.last_comment or 'no reason given'}"
    elif event is Event.EXPIRED:
        subject = f"{what} expired"
        body = f"{what} expired: nobody decided on it in time. Ask again if it is still needed."
    elif event is Event.FINISHED:
        subject = f"{what} {move.state}"
        body = f"{what} finished: {move.state}."
    elif event is Event.LOAN_RETURN_STUCK:
        subject = f"The loan of {what} did not return every node"
        body = (
            f"The loan of {what} ended, but some of its nodes are still lent: another move "
            "holds them or their return failed. The portal tries again, with a growing delay, "
            "until they are back; the move's page says which nodes and why."
        )
    else:
        end = f"{move.loan_until:%Y-%m-%d %H:%M} UTC" if move.loan_until else "soon"
        subject = f"The loan of {what} ends at {end}"
        body = (
            f"The loan of {what} ends at {end}; its nodes then go back to their pools. "
            "Extend it on the loans page if they are still needed."
        )
    return Notice(event, AUDIENCE[event], subject, f"{body}\n{move.url}")
