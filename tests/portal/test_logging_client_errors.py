"""An ordinary 403 is one log line without a traceback; a 500 keeps its traceback (issue
25, U7)."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from portal.logging_config import ClientErrorFilter
from tests.moves_helpers import user_in


@pytest.mark.django_db
def test_a_403_logs_one_line_with_the_reason_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    viewer = Client()
    viewer.force_login(user_in("viewers"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert viewer.get("/pools/new/").status_code == 403
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.exc_info is None and record.exc_text is None
    line = caplog.handler.format(record)
    assert "\n" not in line and "Traceback" not in line
    assert record.getMessage().startswith("Forbidden (Permission denied): /pools/new/ (")


def test_a_server_error_keeps_its_traceback() -> None:
    try:
        raise RuntimeError("a bug")
    except RuntimeError as exc:
        record = logging.LogRecord(
            "django.request",
            logging.ERROR,
            __file__,
            1,
            "Internal Server Error: %s",
            ("/x",),
            (type(exc), exc, exc.__traceback__),
        )
    record.status_code = 500
    assert ClientErrorFilter().filter(record)
    assert record.exc_info is not None and record.getMessage() == "Internal Server Error: /x"
