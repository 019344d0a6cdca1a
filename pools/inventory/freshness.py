"""How fresh the inventory is: when its writer (the watcher, or the periodic sync) last had an
answer from the API server, and whether anyone still writes. Pages, the API and /readyz say
the same thing from this one reading of the lease's row.

The rows are stale when nobody has renewed the lease for a whole sync interval and more (no
watcher runs, and the periodic sync does not come), or when the writer, alive, has had no
answer from the API server for INVENTORY_STALE_SECONDS while something goes wrong (an API
server away, refusing the credentials, answering 5xx). A quiet cluster is not stale: a
watcher hears from it at least once a minute, as each watch stream ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import F
from django.db.models.functions import Now

from pools.common.cluster_access import current_cluster
from pools.core.redact import redact_url
from pools.inventory.lease import lease_name
from pools.models import InventoryLease


@dataclass(frozen=True)
class Freshness:
    cluster: str
    written_ago: float  # seconds since the lease was last renewed (by the database's clock)
    heard_ago: float | None  # since the writer's last answer from the API server
    trouble: str  # what went wrong since, if anything
    stale: bool
    why: str  # what a page says when stale; "" otherwise

    @property
    def age(self) -> float:
        """How old the rows may be: since the last answer, or the last write."""
        return self.heard_ago if self.heard_ago is not None else self.written_ago


def writer_gone_after() -> float:
    """Seconds without a renewal after which no writer is taken to run."""
    return 2 * settings.INVENTORY_SYNC_SECONDS + settings.INVENTORY_LEASE_SECONDS


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def inventory_freshness() -> Freshness | None:
    """The inventory's freshness, or None when no watcher or sync ever took the lease (the
    rows, if any, came from elsewhere: a command, a test). One query."""
    row = (
        InventoryLease.objects.filter(name=lease_name(), renewed_at__isnull=False)
        .annotate(written=Now() - F("renewed_at"), heard=Now() - F("heard_at"))
        .values_list("written", "heard", "trouble")
        .first()
    )
    if row is None:
        return None
    written, heard, trouble = row
    written_ago = max(0.0, written.total_seconds())
    heard_ago = max(0.0, heard.total_seconds()) if heard is not None else None
    trouble = redact_url(trouble)
    cluster = current_cluster()
    why = ""
    if written_ago > writer_gone_after():
        why = (
            f"the inventory of cluster {cluster} was last written {_ago(written_ago)} ago: no "
            "watcher or sync runs"
        )
    elif trouble and (heard_ago is None or heard_ago > settings.INVENTORY_STALE_SECONDS):
        since = f"for {_ago(heard_ago)}" if heard_ago is not None else "yet"
        why = f"the API server of cluster {cluster} has not answered {since}: {trouble}"
    return Freshness(cluster, written_ago, heard_ago, trouble, bool(why), why)
