"""The inventory's bulk upsert writes exactly what the ORM would: its written-out adapters
give the same parameters as each field's own database preparation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connection

from pools.inventory.rows import _parameters, _upsert_statement
from pools.models import GpuPod, Node

PARIS = timezone(timedelta(hours=1))
SAMPLES: dict[type, list[Any]] = {
    datetime: [
        datetime(2026, 11, 30, 9, 16, 54, tzinfo=UTC),
        datetime(2026, 11, 30, 9, 16, 54, 123456, tzinfo=UTC),
        datetime(2026, 11, 30, 10, 16, 54, 5, tzinfo=PARIS),
        None,
    ],
    dict: [{}, {"gpu": "a100", "ü": ["x", 1, None, 2.5, True]}, {"nested": {"a": {}}}, None],
    list: [[], [{"key": "nvidia.com/gpu", "operator": "Exists"}], ["é"], None],
}


def _django_parameters(model: type, row: dict[str, Any]) -> list[Any]:
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    return [
        None if row[f.attname] is None else f.get_db_prep_save(row[f.attname], connection)
        for f in fields
    ]


def _rows(model: type) -> list[dict[str, Any]]:
    """Rows whose every datetime and JSON column takes each sample in turn."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    rows = []
    for index in range(4):
        row: dict[str, Any] = {}
        for field in fields:
            kind = field.get_internal_type()
            if kind == "DateTimeField":
                row[field.attname] = SAMPLES[datetime][index]
            elif kind == "JSONField":
                row[field.attname] = SAMPLES[list if field.default is list else dict][index]
            elif kind == "BooleanField":
                row[field.attname] = index % 2 == 0
            elif "Integer" in kind or kind == "ForeignKey":
                row[field.attname] = index + 1
            else:
                row[field.attname] = f"{field.attname}-{index}"
        rows.append(row)
    return rows


@pytest.mark.django_db
@pytest.mark.parametrize("model", [GpuPod, Node])
def test_the_upsert_adapts_values_as_each_field_does(model: type) -> None:
    tz = connection.timezone if connection.vendor == "sqlite" else None
    _, getter, adapters = _upsert_statement(model, ("name",), (), (), connection.vendor, tz)
    assert len(adapters) >= 4  # the datetime and JSON columns
    for row in _rows(model):
        assert _parameters(row, getter, adapters) == _django_parameters(model, row)


@pytest.mark.django_db
def test_a_page_readers_parameters_are_the_fields_own(settings) -> None:  # type: ignore[no-untyped-def]
    """A pod page read in another process comes back as the upsert's parameters
    (pools.core.sqlite_values): the same as each field's own database preparation, in the
    statement's column order."""
    from pools.inventory.rows import gpu_pod_sqlite_row

    sqlite = gpu_pod_sqlite_row()
    assert sqlite is not None  # the suite runs on SQLite
    for row in _rows(GpuPod):
        assert list(sqlite.parameters(row)) == _django_parameters(GpuPod, row)
