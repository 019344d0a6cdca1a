"""What every log line says about the work it belongs to: the request id, the user, the move.

Kept in a context variable, so each thread (a gunicorn thread, a Celery task) has its own;
portal/logging_config.py copies it onto every record. The web middleware opens a scope per
request, the Celery app one per task, and the code that knows a move binds its id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType

_fields: ContextVar[Mapping[str, object]] = ContextVar("log_context", default=MappingProxyType({}))


def current() -> Mapping[str, object]:
    return _fields.get()


def bind(**fields: object) -> None:
    """Add fields to the current scope (a None value removes the field)."""
    merged = {**_fields.get(), **fields}
    _fields.set({k: v for k, v in merged.items() if v is not None})


@contextlib.contextmanager
def scope(**fields: object) -> Iterator[None]:
    """A fresh context for one unit of work; what it bound is gone afterwards."""
    token = _fields.set({k: v for k, v in fields.items() if v is not None})
    try:
        yield
    finally:
        _fields.reset(token)


def clear() -> None:
    _fields.set({})
