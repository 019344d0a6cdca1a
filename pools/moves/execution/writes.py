"""The hot writes of a move's execution, as plain SQL on the models' tables.

Claiming and closing 200 nodes through the ORM cost more than the Kubernetes calls
themselves (building each UPDATE's expressions, a CASE a row for bulk_update); the SQL here
is the same compare-and-swap, prepared once (names from the models' meta, every value a
parameter). Values go through each model field's own
`get_db_prep_save`, so JSON, datetimes and booleans are stored as the ORM stores them, on
SQLite (3.35 and later, for RETURNING) and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper

from pools.models import AuditEvent, MoveItem, MoveRequest, Node


def _prep(model: type[models.Model], field: str, value: Any) -> Any:
    return model._meta.get_field(field).get_db_prep_save(value, connection)


def _database() -> BaseDatabaseWrapper:
    """This thread's connection itself: `connection` is a proxy that looks it up again on
    every attribute, and a chunk's values are thousands of them."""
    return connections[DEFAULT_DB_ALIAS]


def _preparers(model: type[models.Model], fields: Sequence[str]) -> list[Any]:
    """Each field's own conversion to what the database driver is given, once a statement."""
    return [model._meta.get_field(f).get_db_prep_save for f in fields]


def _columns(model: type[models.Model], fields: Sequence[str]) -> str:
    q = connection.ops.quote_name
    return ", ".join(f"{q(model._meta.get_field(f).column)} = %s" for f in fields)


def claim_items(item_ids: Sequence[int], *, now: datetime, lease: datetime) -> list[int]:
    """Claim every item that is pending, or running on an expired lease, of an executing
    request: one statement, each row its own compare-and-swap. The ids claimed."""
    if not item_ids:
        return []
    q = connection.ops.quote_name
    items, requests = q(MoveItem._meta.db_table), q(MoveRequest._meta.db_table)
    marks = ", ".join(["%s"] * len(item_ids))
    sql = (
        f"UPDATE {items} SET state = %s, lease_until = %s, attempts = attempts + 1 "  # noqa: S608
        f"WHERE id IN ({marks}) "
        f"AND (state = %s OR (state = %s AND lease_until < %s)) "
        f"AND request_id IN (SELECT id FROM {requests} WHERE state = %s) RETURNING id"
    )
    running, pending = MoveItem.State.RUNNING, MoveItem.State.PENDING
    params = [
        running,
        _prep(MoveItem, "lease_until", lease),
        *item_ids,
        pending,
        running,
        _prep(MoveItem, "lease_until", now),
        MoveRequest.State.EXECUTING,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return sorted(row[0] for row in cursor.fetchall())


CLOSED_FIELDS = (
    "state",
    "finished_at",
    "lease_until",
    "waiting",
    "error",
    "before",
    "after",
    "applied_diff",
)


@dataclass(frozen=True)
class Closing:
    """One node's end, to record if this worker's claim (its attempt count) still holds it."""

    item_id: int
    attempts: int
    values: dict[str, Any]  # CLOSED_FIELDS


def closing_rows(closings: Sequence[Closing]) -> list[list[Any]]:
    """Each closing's parameters for `close_items`' statement, every value as the database
    is given it (the JSON encoded): work a caller can do before taking the write lock."""
    running, db = MoveItem.State.RUNNING, _database()
    preparers = list(zip(CLOSED_FIELDS, _preparers(MoveItem, CLOSED_FIELDS), strict=True))
    return [
        [*(prep(c.values[f], db) for f, prep in preparers), c.item_id, running, c.attempts]
        for c in closings
    ]


def close_items(closings: Sequence[Closing], rows: list[list[Any]] | None = None) -> set[int]:
    """Record each node's end where this worker's claim still holds it: one prepared
    statement, each row its own compare-and-swap (`rows`: `closing_rows(closings)`, if
    prepared already). The ids recorded."""
    if not closings:
        return set()
    sql = (
        f"UPDATE {connection.ops.quote_name(MoveItem._meta.db_table)} "  # noqa: S608
        f"SET {_columns(MoveItem, CLOSED_FIELDS)} "
        "WHERE id = %s AND state = %s AND attempts = %s"
    )
    params = closing_rows(closings) if rows is None else rows
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
        if cursor.rowcount == len(params):  # the drivers sum the rows of every parameter set
            return {c.item_id for c in closings}
    # Some were claimed since by another worker (their lease had run out). An item is ours if
    # its attempt count still is: only a claim changes it, and a finished item is never
    # claimed again.
    ours = {c.item_id: c.attempts for c in closings}
    finished = MoveItem.objects.filter(pk__in=ours, state__in=MoveItem.FINISHED)
    return {pk for pk, attempts in finished.values_list("pk", "attempts") if ours[pk] == attempts}


def event_rows(events: Sequence[AuditEvent], *, at: datetime) -> list[list[Any]]:
    """Each event stamped `at`, as `insert_event_rows`' parameters (work a caller can do
    before taking the write lock)."""
    db = _database()
    preparers = [(f.attname, f.get_db_prep_save) for f in _event_fields()]
    for event in events:
        event.at = at
    return [[prep(getattr(e, name), db) for name, prep in preparers] for e in events]


def insert_event_rows(rows: Sequence[list[Any]]) -> None:
    """Append audit events in one prepared statement (what bulk_create writes, without its
    per-field compilation of every row)."""
    if not rows:
        return
    fields = _event_fields()
    q = connection.ops.quote_name
    sql = (
        f"INSERT INTO {q(AuditEvent._meta.db_table)} "  # noqa: S608
        f"({', '.join(q(f.column) for f in fields)}) VALUES ({', '.join(['%s'] * len(fields))})"
    )
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _event_fields() -> list[Any]:
    return [f for f in AuditEvent._meta.concrete_fields if not f.primary_key]


def update_nodes(rows: Sequence[Node], fields: Sequence[str]) -> None:
    """Write `fields` of each row (by name): one prepared statement, many parameter sets."""
    if not rows:
        return
    columns = [Node._meta.get_field(f).attname for f in fields]
    sql = (
        f"UPDATE {connection.ops.quote_name(Node._meta.db_table)} "  # noqa: S608
        f"SET {_columns(Node, fields)} WHERE cluster = %s AND name = %s"
    )
    db = _database()
    preparers = list(zip(columns, _preparers(Node, fields), strict=True))
    params = [
        [*(prep(getattr(row, c), db) for c, prep in preparers), row.cluster, row.name]
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
