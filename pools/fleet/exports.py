"""CSV exports of the node table, the moves and the audit log, filtered by the same
FilterSets as their pages and the API (pools/fleet/filters.py).

Each export is a generator of rows over one database cursor (two for moves), so a response
streams whatever the size of the list and costs a constant number of queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from typing import Any

from django.db.models import Count, QuerySet, TextField
from django.db.models.functions import Cast

from pools.core import csv_cells
from pools.metrics.node_figures import latest_node_metrics
from pools.models import AuditEvent, MoveItem, MoveRequest, Node

_CHUNK = 500

NODE_COLUMNS = (
    "name",
    "pool",
    "gpu_model",
    "gpus",
    "allocated",
    "unallocated",
    "ready",
    "cordoned",
    "drifted",
    "pods",
    "util_percent",
    "fb_used_mib",
    "fb_total_mib",
    "temp_max_celsius",
    "xid_gpus",
    "last_seen",
    "gone_at",
)


def node_csv_rows(nodes: QuerySet[Node]) -> Iterator[list[object]]:
    """The node table with each node's latest DCGM figures (blank where there are none)."""
    _, metrics = latest_node_metrics()
    yield list(NODE_COLUMNS)
    fields = ("name", "pool__name", "gpu_model", "gpu_allocatable", "gpu_allocated", "ready")
    more = ("cordoned", "drifted", "pods", "last_seen", "gone_at")
    for row in nodes.order_by("name").values_list(*fields, *more).iterator(_CHUNK):
        name, pool, model, gpus, allocated, ready, cordoned, drifted, pods, seen, gone = row
        m = metrics.get(name)
        yield csv_cells.row(
            [name, pool, model, gpus, allocated, max(0, gpus - allocated), ready, cordoned]
            + [drifted, len(pods)]
            + ([m.util, m.fb_used, m.fb_total, m.temp_max, m.xid_gpus] if m else [None] * 5)
            + [seen, gone]
        )


MOVE_COLUMNS = (
    "id",
    "kind",
    "state",
    "destination",
    "requested_by",
    "reason",
    "nodes",
    "approvals",
    "approvals_required",
    "created_at",
    "decided_at",
    "finished_at",
    "loan_until",
    "parent",
)


def move_rows(moves: QuerySet[MoveRequest]) -> Iterator[list[object]]:
    """One row a request, its nodes' names joined with spaces: the requests and their items
    are read as two cursors in the same order (newest first) and merged."""
    fields = ("pk", "kind", "state", "destination__name", "requested_by__username", "reason")
    when = ("created_at", "decided_at", "finished_at", "loan_until", "parent_id")
    requests = (
        moves.order_by("-pk")
        .annotate(approval_count=Count("approvals", distinct=True))
        .values_list(*fields, "approval_count", "approvals_required", *when)
    )
    items = (
        MoveItem.objects.filter(request__in=moves.values("pk"))
        .order_by("-request_id", "node__name")
        .values_list("request_id", "node__name")
    )
    by_request = groupby(items.iterator(_CHUNK), key=lambda item: item[0])
    current: tuple[Any, Any] = next(by_request, (None, iter(())))
    yield list(MOVE_COLUMNS)
    for (
        pk,
        *head,
        approvals,
        required,
        created,
        decided,
        finished,
        loan,
        parent,
    ) in requests.iterator(_CHUNK):
        while current[0] is not None and current[0] > pk:  # items of a request not listed
            current = next(by_request, (None, iter(())))
        names = [name for _, name in current[1]] if current[0] == pk else []
        names_text = " ".join(names)
        yield csv_cells.row(
            [pk, *head, names_text, approvals, required, created, decided, finished, loan, parent]
        )


AUDIT_COLUMNS = ("at", "actor", "action", "move", "node", "message", "before", "after")


def audit_rows(events: QuerySet[AuditEvent]) -> Iterator[list[object]]:
    """Before and after as the database keeps their JSON text: decoding and encoding again
    each row's dicts would cost more than the rest of the row."""
    yield list(AUDIT_COLUMNS)
    fields = ("at", "actor_name", "action", "request_id", "node_name", "message")
    rows = (
        events.order_by("-at", "-id")
        .annotate(before_text=Cast("before", TextField()), after_text=Cast("after", TextField()))
        .values_list(*fields, "before_text", "after_text")
    )
    for *head, before, after in rows.iterator(_CHUNK):
        yield csv_cells.row([*head, _json_text(before), _json_text(after)])


def _json_text(text: str | None) -> str | None:
    return None if text is None or text.replace(" ", "") == "{}" else text
