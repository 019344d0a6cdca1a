"""The inventory's single-writer lease: a row in the database, taken and renewed with
conditional updates, so two processes can never both believe they hold it.

Times are the database's (`Now()`), not each process's clock: a holder on a pod whose
clock runs ahead cannot keep a lease that has expired for everyone else.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from pools.common.cluster_access import current_cluster
from pools.models import InventoryLease

NAME = "inventory"


def lease_name() -> str:
    """The current cluster's lease: each cluster has its writer. The portal's own cluster
    keeps the name its lease had before there were several."""
    cluster = current_cluster()
    return NAME if cluster == settings.CLUSTER_NAME else f"{NAME}@{cluster}"


# An expiry in the past that is never reached again: a released lease.
_RELEASED = timedelta(days=1)


def holder_name(role: str) -> str:
    """Unique per process: the host (the pod's name under Kubernetes) and the pid."""
    return f"{role}:{socket.gethostname()}:{os.getpid()}"


def _taken(holder: str, seconds: float) -> int:
    free_or_mine = Q(holder=holder) | Q(expires_at__lt=Now())
    return InventoryLease.objects.filter(free_or_mine, name=lease_name()).update(
        holder=holder,
        renewed_at=Now(),
        expires_at=Now() + timedelta(seconds=seconds),
    )


def lease_acquire(holder: str, seconds: float) -> bool:
    """Take the lease if it is free or expired, or renew it if `holder` has it."""
    if _taken(holder, seconds):
        InventoryLease.objects.filter(
            name=lease_name(), holder=holder, acquired_at__isnull=True
        ).update(acquired_at=Now())
        return True
    try:
        with transaction.atomic():
            InventoryLease.objects.create(
                name=lease_name(),
                holder=holder,
                acquired_at=Now(),
                renewed_at=Now(),
                expires_at=Now() + timedelta(seconds=seconds),
            )
    except IntegrityError:
        return False  # someone else's row: held (checked above) or just created
    return True


@dataclass(frozen=True)
class Contact:
    """The writer's last answer from the API server, `ago` seconds back (None: none yet),
    and what has gone wrong since, if anything."""

    ago: float | None
    trouble: str = ""


def _contact_fields(contact: Contact) -> dict[str, Any]:
    # The database's clock, as for the lease itself: the age is measured by the writer.
    fields: dict[str, Any] = {"trouble": contact.trouble[:500]}
    if contact.ago is not None:
        fields["heard_at"] = Now() - timedelta(seconds=max(0.0, contact.ago))
    return fields


def lease_renew(holder: str, seconds: float, contact: Contact | None = None) -> bool:
    """Extend the lease `holder` has, noting its `contact` with the API server; False when
    it is no longer theirs (it expired and was taken over): the caller must stop writing."""
    # Still ours even if it ran out meanwhile, as long as nobody took it: the holder stops
    # writing by itself once it has not renewed for a whole lease (the watcher's guard).
    fields = _contact_fields(contact) if contact is not None else {}
    return bool(
        InventoryLease.objects.filter(name=lease_name(), holder=holder).update(
            renewed_at=Now(), expires_at=Now() + timedelta(seconds=seconds), **fields
        )
    )


def lease_contact(holder: str, contact: Contact) -> None:
    """Note how a one-off writer (the periodic sync) fared with the API server."""
    InventoryLease.objects.filter(name=lease_name(), holder=holder).update(
        **_contact_fields(contact)
    )


def lease_release(holder: str) -> None:
    """Give the lease up at once (a clean shutdown): the next writer need not wait."""
    InventoryLease.objects.filter(name=lease_name(), holder=holder).update(
        holder="", acquired_at=None, expires_at=Now() - _RELEASED
    )


def lease_holder() -> str | None:
    """Who holds the lease now, or None."""
    row = InventoryLease.objects.filter(name=lease_name(), expires_at__gte=Now()).first()
    return row.holder if row and row.holder else None


def lease_last_renewed() -> tuple[str, float] | None:
    """Who last held the lease and how many seconds ago they last renewed it (by the
    database's clock), or None when it was never taken."""
    row = (
        InventoryLease.objects.filter(name=lease_name(), renewed_at__isnull=False)
        .annotate(age=Now() - F("renewed_at"))
        .values_list("holder", "age")
        .first()
    )
    if row is None:
        return None
    holder, age = row
    return holder, max(0.0, age.total_seconds())


def relist_request() -> str | None:
    """Ask the watcher holding the lease to list everything again; its name, or None when
    no watcher holds it."""
    held = InventoryLease.objects.filter(
        name=lease_name(), expires_at__gte=Now(), holder__startswith="watcher:"
    )
    if held.update(relist_requested_at=Now()):
        return lease_holder()
    return None


def relist_taken(holder: str) -> bool:
    """For the watcher: whether a re-list was asked for since it last looked (and forget it)."""
    return bool(
        InventoryLease.objects.filter(
            name=lease_name(), holder=holder, relist_requested_at__isnull=False
        ).update(relist_requested_at=None)
    )
