"""Celery's process pool logs through billiard's own logger ("multiprocessing"), which turns
its propagation off: its lines must still come out in the portal's format, not bare."""

from __future__ import annotations

import json
import logging
import logging.config

import pytest
from billiard.util import get_logger

from portal.logging_config import logging_config


@pytest.fixture
def restored_logging():  # type: ignore[no-untyped-def]
    from django.conf import settings

    yield
    logging.config.dictConfig(settings.LOGGING)


def test_a_pool_process_that_died_is_logged_as_a_json_event(restored_logging, capsys) -> None:  # type: ignore[no-untyped-def]
    logging.config.dictConfig(logging_config("json", "INFO"))
    pool = get_logger()  # as billiard's pool does: propagation off from here on
    assert not pool.propagate
    pool.error("Process %r pid:%r exited with %r", "ForkPoolWorker-2", 27088, "signal 15")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    event = json.loads(lines[0])
    assert event["level"] == "ERROR" and event["logger"] == "multiprocessing"
    assert event["message"] == "Process 'ForkPoolWorker-2' pid:27088 exited with 'signal 15'"
