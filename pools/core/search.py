"""What a search query means, and whether a node's labels or pods match it.

One box answers several questions: ``#12`` or ``12`` is a move by number, ``key=value`` a
node label, anything else a piece of a node name, a label value, a pod name (``ns/pod``
too) or a pool. Matching ignores case; the database only narrows the rows first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_QUERY_LENGTH = 200
_MOVE_NUMBER = re.compile(r"#?\s*(\d{1,18})")


@dataclass(frozen=True)
class Query:
    text: str  # as typed, trimmed
    move_id: int | None  # "#12" or "12"
    label_key: str | None  # "key=value": an exact label
    label_value: str | None

    @property
    def needle(self) -> str:
        """What the database may narrow rows by (a case-insensitive substring)."""
        return self.label_value if self.label_value is not None else self.text


def query_problem(text: str) -> str | None:
    """Why `text` cannot be searched for, or None."""
    if len(text) > MAX_QUERY_LENGTH:
        return f"At most {MAX_QUERY_LENGTH} characters."
    if "\x00" in text:  # PostgreSQL refuses it in any string
        return "Null characters are not allowed."
    return None


def parse_query(text: str) -> Query:
    text = text.strip()
    number = _MOVE_NUMBER.fullmatch(text)
    move_id = int(number.group(1)) if number else None
    key, sep, value = text.partition("=")
    if sep and key.strip() and value.strip():
        return Query(text, move_id, key.strip(), value.strip())
    return Query(text, move_id, None, None)


def label_matches(labels: Mapping[str, str], query: Query) -> list[str]:
    """The node's labels the query matches, as ``key=value``."""
    if query.label_key is not None:
        value = labels.get(query.label_key)
        assert query.label_value is not None
        if value is not None and value.lower() == query.label_value.lower():
            return [f"{query.label_key}={value}"]
        return []
    needle = query.text.lower()
    return [f"{k}={v}" for k, v in sorted(labels.items()) if needle in str(v).lower()]


def pod_matches(pods: Sequence[Mapping[str, Any]], query: Query) -> list[Mapping[str, Any]]:
    """The pods (as the inventory keeps them: name, namespace, …) whose name matches."""
    if query.label_key is not None:
        return []
    needle = query.text.lower()
    return [
        p
        for p in pods
        if needle in str(p.get("name", "")).lower()
        or needle == f"{p.get('namespace', '')}/{p.get('name', '')}".lower()
    ]
