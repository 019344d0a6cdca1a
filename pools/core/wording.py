"""The words the pages use for states, kinds and counts (pure: no Django).

States are stored as stable codes (`partially_failed`, `loan_return`); people read these
labels. One table, so a filter tab, a badge and a table cell say the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# Move states, node (item) states, kinds and the move list's extra tabs.
STATE_LABELS = {
    "active": "Active",
    "all": "All",
    "pending": "Pending approval",
    "approved": "Approved",
    "executing": "Executing",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "partially_failed": "Partially failed",
    "rejected": "Rejected",
    "cancelled": "Cancelled",
    "expired": "Expired",
    "running": "Running",
    "done": "Done",
    "unchanged": "Unchanged",
    "move": "Move",
    "reconcile": "Reconcile",
    "loan_return": "Loan return",
}


def human_label(code: str) -> str:
    """The label of a state or kind code; an unknown code reads as words, never as `a_b`."""
    return STATE_LABELS.get(code, code.replace("_", " ").capitalize())


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """`1 node`, `2 nodes`, `0 nodes` (for messages built outside templates)."""
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


def drift_phrases(drift: Mapping[str, Any]) -> list[str]:
    """What a drifted node lacks or carries in excess, one phrase each, in a fixed order."""
    phrases: list[str] = []
    phrases += [f"missing label {k}={v}" for k, v in _items(drift.get("labels_added"))]
    phrases += [
        f"label {k} is {v.get('from')}, should be {v.get('to')}"
        for k, v in _items(drift.get("labels_changed"))
    ]
    phrases += [f"extra label {k}" for k in drift.get("labels_removed") or ()]
    phrases += [f"missing taint {t}" for t in drift.get("taints_added") or ()]
    phrases += [f"extra taint {t}" for t in drift.get("taints_removed") or ()]
    return phrases


def _items(mapping: Mapping[str, Any] | None) -> Iterable[tuple[str, Any]]:
    return sorted((mapping or {}).items())
