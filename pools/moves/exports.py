"""The moves as CSV, filtered by the move list's FilterSet (pools/moves/filters.py): rows
over two database cursors (requests, and their items in the same order)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from typing import Any

from django.db.models import Count, QuerySet

from pools.core import csv_cells
from pools.models import MoveItem, MoveRequest


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
    by_request = groupby(items.iterator(csv_cells.EXPORT_CHUNK_ROWS), key=lambda item: item[0])
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
    ) in requests.iterator(csv_cells.EXPORT_CHUNK_ROWS):
        while current[0] is not None and current[0] > pk:  # items of a request not listed
            current = next(by_request, (None, iter(())))
        names = [name for _, name in current[1]] if current[0] == pk else []
        names_text = " ".join(names)
        yield csv_cells.row(
            [pk, *head, names_text, approvals, required, created, decided, finished, loan, parent]
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
