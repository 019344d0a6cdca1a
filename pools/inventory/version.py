"""The inventory's version: one counter that every write of `Node` rows raises, in the same
transaction as the write.

Figures derived from every row (the overview's per-pool figures) are cached under the
version read before the rows: a reader that sees a new version also sees the rows written
with it (same transaction), and figures stored under an old version are at least as new as
that version. So a cached figure is never served after the rows it came from changed, and
a page that finds the version unchanged reads no rows at all.
"""

from __future__ import annotations

from functools import cache

from django.db import connection

from pools.models import InventoryVersion

NODES = "nodes"


@cache
def _read_statement(vendor: str) -> str:
    table = connection.ops.quote_name(InventoryVersion._meta.db_table)
    return f"SELECT version FROM {table} WHERE name = %s"  # noqa: S608 -- our own table


def inventory_version() -> int:
    """The node rows' current version (0 before any write). One indexed read, written out:
    every API request reads it, and building the ORM's query was a quarter of a kept
    page's CPU."""
    with connection.cursor() as cursor:
        cursor.execute(_read_statement(connection.vendor), [NODES])
        found = cursor.fetchone()
    return found[0] if found else 0


@cache
def _bump_statement(vendor: str) -> str:
    table = connection.ops.quote_name(InventoryVersion._meta.db_table)
    # One statement whether or not the row exists yet (a fresh or flushed database), so a
    # write's statement count does not depend on history.
    return (
        f"INSERT INTO {table} (name, version) VALUES (%s, 1) "  # noqa: S608 -- our own table
        f"ON CONFLICT (name) DO UPDATE SET version = {table}.version + 1"
    )


def inventory_version_bump() -> None:
    """Say the node rows changed: call it inside the transaction that changed them (or
    after the change is committed), never before."""
    with connection.cursor() as cursor:
        cursor.execute(_bump_statement(connection.vendor), [NODES])
