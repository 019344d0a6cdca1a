"""How every process logs: readable lines, or one JSON event per line (LOG_FORMAT=json).

One configuration for Django (settings.LOGGING), gunicorn's master (gunicorn.conf.py) and
Celery (portal/celery.py takes over its logging set-up), with one handler. That handler
copies the request id, the user and the move id (pools/common/log_context.py) onto each record and
passes it through the redaction filter (pools/core/redact.py), so no password in a URL
reaches a log whichever library wrote the line. The JSON formatter redacts again, field by
field: a library may put a URL in a field of its own (Celery's `data`), and
python-json-logger formats a traceback afresh instead of using the redacted text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _BaseJsonFormatter

from pools.common import log_context
from pools.core.redact import redact_url

CONTEXT_FIELDS = ("request_id", "user", "move_id", "task_id", "task_name")
# The keys a JSON event starts with, in this order; the context and any extra follow.
LEADING_FIELDS = ("timestamp", "level", "logger", "message")


class ContextFilter(logging.Filter):
    """Copies the current request id, user, move id and task onto the record."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in log_context.current().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class ClientErrorFilter(logging.Filter):
    """A 4xx Django logs (django.request) is one line: the refusal, not a traceback. Django
    logs an ordinary 403 (PermissionDenied) with the stack of the check that refused, which
    says nothing an operator can act on; the refusal's reason goes into the line instead.
    A 5xx keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and 400 <= getattr(record, "status_code", 500) < 500:
            reason = str(record.exc_info[1] or "")
            record.msg = record.getMessage() + (f" ({reason})" if reason else "")
            record.args = ()
            record.exc_info = record.exc_text = None
        return True


def _context_text(record: logging.LogRecord) -> str:
    pairs = [f"{k}={getattr(record, k)}" for k in CONTEXT_FIELDS if hasattr(record, k)]
    return f" [{' '.join(pairs)}]" if pairs else ""


class TextFormatter(logging.Formatter):
    """`2025-01-31 12:00:00,000 INFO pools.moves.execution.run [request_id=… move_id=12] …`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(context)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.context = _context_text(record)
        return super().format(record)

    def formatException(self, ei: Any) -> str:
        return redact_url(super().formatException(ei))


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, Mapping):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return value


class JsonFormatter(_BaseJsonFormatter):
    """One JSON object per line: timestamp (UTC, ISO 8601), level, logger, message, then the
    context (request_id, user, move_id, task_id, task_name), extras and any traceback."""

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"},
            timestamp=True,
        )

    def formatException(self, ei: Any) -> str:
        return redact_url(super().formatException(ei))

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        # Django attaches the HttpRequest to its own records (django.request): its repr is
        # the full path, percent-encoded, which no redaction reads. The request's line says
        # everything useful about it.
        log_data.pop("request", None)
        leading = {k: log_data.pop(k) for k in LEADING_FIELDS if k in log_data}
        return _redacted({**leading, **log_data})


def logging_config(log_format: str, level: str) -> dict[str, Any]:
    """The dictConfig for LOG_FORMAT (text or json) and LOG_LEVEL."""
    handler = {
        "class": "logging.StreamHandler",
        "formatter": log_format,
        "filters": ["context", "redact"],
    }
    # NOTSET: the level is the root's, LOG_LEVEL (a propagated record meets no other).
    through_root = {"handlers": [], "propagate": True, "level": "NOTSET"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "text": {"()": "portal.logging_config.TextFormatter"},
            "json": {"()": "portal.logging_config.JsonFormatter"},
        },
        "filters": {
            "context": {"()": "portal.logging_config.ContextFilter"},
            "redact": {"()": "pools.core.redact.RedactSecretsFilter"},
            "client_error": {"()": "portal.logging_config.ClientErrorFilter"},
        },
        "handlers": {"console": handler},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # Django's defaults give these their own handlers (a debug console, the runserver
            # lines) that would bypass the filters: everything goes through the root's.
            "django": through_root,
            "django.request": {**through_root, "filters": ["client_error"]},
            "django.server": through_root,
            "gunicorn.error": through_root,
            # The portal logs every request itself (portal.request, with the request id,
            # the user, the view and the time taken); gunicorn's access line would repeat it.
            "gunicorn.access": {"handlers": [], "propagate": False, "level": "WARNING"},
            # Celery's process pool (billiard) logs here, and turns the logger's propagation
            # off when it first uses it: without a handler of its own, a pool process that
            # died ("exited with signal 15") was printed bare by Python's last-resort handler.
            "multiprocessing": {"handlers": ["console"], "propagate": False, "level": "WARNING"},
        },
    }
