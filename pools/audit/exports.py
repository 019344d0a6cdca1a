"""The audit log as CSV, filtered by its FilterSet (pools/audit/filters.py): rows over one
database cursor."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from pools.core import csv_cells
from pools.models import AuditEvent


def audit_rows(events: QuerySet[AuditEvent]) -> Iterator[list[object]]:
    """Before and after as the database keeps their JSON text: decoding and encoding again
    each row's dicts would cost more than the rest of the row."""
    yield list(AUDIT_COLUMNS)
    fields = ("at", "cluster", "actor_name", "action", "request_id", "node_name", "message")
    rows = (
        events.order_by("-at", "-id")
        .annotate(before_text=Cast("before", TextField()), after_text=Cast("after", TextField()))
        .values_list(*fields, "before_text", "after_text")
    )
    for *head, before, after in rows.iterator(csv_cells.EXPORT_CHUNK_ROWS):
        yield csv_cells.row([*head, _json_text(before), _json_text(after)])


AUDIT_COLUMNS = ("at", "cluster", "actor", "action", "move", "node", "message", "before", "after")


def _json_text(text: str | None) -> str | None:
    return None if text is None or text.replace(" ", "") == "{}" else text
