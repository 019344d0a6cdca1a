"""Cells of an exported CSV that a spreadsheet will not run.

A cell starting with ``=``, ``+``, ``-``, ``@`` (or a tab or carriage return) is a formula to
Excel and LibreOffice: a move's reason or an audit message written by one user would run on
the machine of whoever opens the export. Such text is prefixed with an apostrophe (OWASP's
advice); numbers are written as numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value: object) -> object:
    if type(value) is str:  # most cells: the fast path first
        return "'" + value if value.startswith(_FORMULA_START) else value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def row(values: Iterable[object]) -> list[object]:
    return [cell(v) for v in values]


# Rows an export fetches from its database cursor at a time: a response streams whatever the
# size of the list.
EXPORT_CHUNK_ROWS = 500
