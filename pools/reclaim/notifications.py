"""Notifications of reclaims. The pod's owner learns that it was found idle and how long the
grace is, and what became of it; those who may file requests that one is due; the approvers
that one was filed; its filer and its approver how it ended. By e-mail and webhook, each only
when configured (NOTIFY_EMAIL, NOTIFY_WEBHOOK_URL), as for moves.

The owner's e-mail is the pod's contact annotation when that is an address. The webhook's body
carries the team, the namespace and the contact, so a chat bridge can route it to the owner
when the contact is a handle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.urls import reverse

from pools.common.cluster_access import cluster_path
from pools.common.roles import Capability, emails_of_those_who
from pools.models import Reclaim
from pools.notify.mail import mail_send
from pools.notify.webhook import webhook_post

log = logging.getLogger(__name__)
# people: its filer and approver; filers: those who may file a request (requesters and admins)
OWNER, FILERS, APPROVERS, PEOPLE = "owner", "filers", "approvers", "people"
# event -> (what the subject says, who is told)
EVENTS: dict[str, tuple[str, frozenset[str]]] = {
    "noticed": ("found holding idle GPUs", frozenset({OWNER})),
    "due": ("its grace is over: a reclaim request waits to be filed", frozenset({FILERS})),
    "requested": ("a reclaim request waits for your approval", frozenset({APPROVERS})),
    "approved": ("reclaim approved: the pod is being evicted", frozenset({OWNER, PEOPLE})),
    "rejected": ("reclaim rejected: the pod is kept", frozenset({OWNER, PEOPLE})),
    "ended": ("reclaim ended", frozenset({OWNER, PEOPLE})),
}


def _reclaim(reclaim_id: int) -> Reclaim:
    return Reclaim.objects.select_related("pool", "requested_by", "decided_by").get(pk=reclaim_id)


def owner_email(reclaim: Reclaim) -> str:
    """The contact annotation when it is an e-mail address, else ""."""
    try:
        validate_email(reclaim.contact)
    except ValidationError:
        return ""
    return reclaim.contact


def recipients(event: str, reclaim: Reclaim) -> list[str]:
    audience = EVENTS[event][1]
    found = set()
    if OWNER in audience and (owner := owner_email(reclaim)):
        found.add(owner)
    if FILERS in audience:
        found |= set(emails_of_those_who(Capability.REQUEST_MOVE))
    if APPROVERS in audience:
        found |= set(emails_of_those_who(Capability.APPROVE_MOVE, but=reclaim.requested_by_id))
    if PEOPLE in audience:
        for user in (reclaim.requested_by, reclaim.decided_by):
            if user is not None and user.is_active and user.email:
                found.add(user.email)
    return sorted(found)


def _text(event: str, reclaim: Reclaim) -> tuple[str, str]:
    path = cluster_path(reverse("reclaim-detail", args=[reclaim.pk]), reclaim.pool.cluster)
    url = f"{settings.PORTAL_URL}{path}" if settings.PORTAL_URL else path
    pod = f"{reclaim.namespace}/{reclaim.pod}"
    subject = f"Reclaim #{reclaim.pk}, {pod} in {reclaim.pool.name}: {EVENTS[event][0]}"
    lines = [
        subject + ".",
        f"It holds {reclaim.units} GPU unit{'' if reclaim.units == 1 else 's'} on "
        f"{reclaim.node_name}, idle {reclaim.gpu_hours:g} GPU-hours over the last week.",
    ]
    if event == "noticed":
        lines.append(
            f"Unless it works again, a request to evict it may be filed after "
            f"{reclaim.grace_until:%Y-%m-%d %H:%M} UTC. To keep it for good, annotate it "
            f"{settings.RECLAIM_OPT_OUT_ANNOTATION}=never."
        )
    if event in ("requested", "due"):
        lines.append(f"Why: {reclaim.reason}")
    if reclaim.decision_reason and event in ("approved", "rejected"):
        lines.append(f"Decided: {reclaim.decision_reason}")
    if event == "ended":
        lines.append(f"It is {reclaim.get_state_display()}: {reclaim.outcome}")
    lines.append(f"See {url}")
    return subject, "\n".join(lines)


def reclaim_email(*, event: str, reclaim_id: int) -> int:
    reclaim = _reclaim(reclaim_id)
    subject, text = _text(event, reclaim)
    return mail_send(subject=subject, text=text, recipients=recipients(event, reclaim))


def reclaim_webhook(*, event: str, reclaim_id: int) -> None:
    reclaim = _reclaim(reclaim_id)
    subject, text = _text(event, reclaim)
    body = {
        "text": text,
        "event": f"reclaim.{event}",
        "reclaim": reclaim.pk,
        "pool": reclaim.pool.name,
        "namespace": reclaim.namespace,
        "pod": reclaim.pod,
        "node": reclaim.node_name,
        "team": reclaim.team,
        "contact": reclaim.contact,
        "state": reclaim.state,
        "grace_until": reclaim.grace_until.isoformat(),
        "subject": subject,
    }
    assert settings.NOTIFY_WEBHOOK_URL is not None
    webhook_post(settings.NOTIFY_WEBHOOK_URL, body, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT)
    log.info("reclaim #%s %s: webhook delivered", reclaim_id, event)


SENDERS: dict[str, Callable[..., object]] = {"email": reclaim_email, "webhook": reclaim_webhook}
