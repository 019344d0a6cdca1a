"""Recording what happened: one AuditEvent per step, append-only."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from pools.models import AuditEvent, Booking, Maintenance, MoveRequest, Reclaim

SYSTEM = "system"


def audit(
    action: str,
    *,
    actor: AbstractBaseUser | None = None,
    request: MoveRequest | None = None,
    maintenance: Maintenance | None = None,
    booking: Booking | None = None,
    reclaim: Reclaim | None = None,
    node_name: str = "",
    message: str = "",
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        action=action,
        actor=actor,
        actor_name=actor.get_username() if actor is not None else SYSTEM,
        request=request,
        maintenance=maintenance,
        booking=booking,
        reclaim=reclaim,
        node_name=node_name,
        message=message,
        before=before or {},
        after=after or {},
    )
