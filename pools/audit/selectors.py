"""Reads of the audit log for its page."""

from __future__ import annotations

from pools.models import AuditEvent


def audit_event_types() -> list[str]:
    """The event types the log holds (move.approved, node.patched, …), for the audit filter."""
    return list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct())
