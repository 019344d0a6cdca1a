"""The values SQLite's Django backend stores, written out (pure): a JSONField's value as
`json.dumps` text, a datetime as naive text in the connection's zone. The inventory writes
hundreds of thousands of rows in one listing, and the backend's adapters (a lookup of the
settings and the connection for every value) cost more than the rest of building a row; the
pod rows' values are even built in a process without Django (pools.core.pod_page)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import cache, lru_cache
from typing import Any


def json_text(value: Any) -> str:
    """What SQLite's backend stores for a JSONField without an encoder: `json.dumps`. Most
    scheduling blocks are empty: those are constants."""
    if value == {}:
        return "{}"
    if value == []:
        return "[]"
    return json.dumps(value)


@cache
def sqlite_datetime(tz: tzinfo) -> Callable[[datetime], str]:
    """What SQLite's backend stores for a datetime: naive in the connection's zone `tz`, as
    text. Pods of one job share their times, and a listing's rows their `updated_at`:
    remembered."""

    @lru_cache(maxsize=4096)
    def adapt(value: datetime) -> str:
        if value.tzinfo is not None:
            value = value.astimezone(tz).replace(tzinfo=None)
        return str(value)

    return adapt


@dataclass(frozen=True)
class SqliteRow:
    """A table's columns in an upsert's order, with those stored as JSON text and as
    datetimes: a row of attribute values becomes the statement's parameters."""

    columns: tuple[str, ...]
    json_columns: frozenset[str]
    datetime_columns: frozenset[str]
    tz: tzinfo

    def parameters(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        adapt = sqlite_datetime(self.tz)
        values = []
        for column in self.columns:
            value = row[column]
            if value is not None:
                if column in self.json_columns:
                    value = json_text(value)
                elif column in self.datetime_columns:
                    value = adapt(value)
            values.append(value)
        return tuple(values)
