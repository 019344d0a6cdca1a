"""Writes for the advisor: dismissing a suggestion, with a reason, on its current evidence."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from pools.audit import audit
from pools.common.errors import InvalidInput
from pools.common.roles import Capability
from pools.insights import gather
from pools.models import AdviceDismissal
from pools.moves.rules import require_capability


def advice_dismiss(
    *, key: str, reason: str, user: AbstractBaseUser, days: int, now: datetime
) -> AdviceDismissal:
    """Hide the suggestion `key` while its evidence stays what it is now. Those who may ask
    for moves may dismiss what would ask for one."""
    require_capability(user, Capability.REQUEST_MOVE, "dismiss advice")
    if not reason.strip():
        raise InvalidInput("validation", "A dismissal needs a reason.", {"reason": "Required."})
    current = {a.key: a for a in gather.advice(days=days, now=now, dismissed=True)}
    found = current.get(key)
    if found is None:
        raise InvalidInput(
            "validation",
            f"No suggestion {key!r} stands now.",
            {"key": f"No suggestion {key!r} over the last {days} days."},
        )
    with transaction.atomic():
        dismissal, _ = AdviceDismissal.objects.update_or_create(
            key=key,
            defaults={
                "fingerprint": found.fingerprint,
                "reason": reason.strip(),
                "dismissed_by": user,
            },
        )
        audit("advice.dismissed", actor=user, message=f"{found.title}: {reason.strip()}")
    return dismissal
