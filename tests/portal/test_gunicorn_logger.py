"""gunicorn builds its access line only when the access logger would write it: the portal's
logging silences it (the portal logs each request itself), a deployment may turn it on."""

from __future__ import annotations

import copy
import logging
import logging.config
from collections.abc import Iterator

import pytest
from django.conf import settings
from gunicorn.config import Config

from portal.gunicorn_logger import PortalGunicornLogger


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    yield
    logging.config.dictConfig(settings.LOGGING)


def logger_with(logging_dict: dict) -> PortalGunicornLogger:  # type: ignore[type-arg]
    config = Config()
    config.set("logconfig_dict", logging_dict)
    return PortalGunicornLogger(config)


def test_the_portal_s_logging_builds_no_access_line() -> None:
    assert logger_with(settings.LOGGING).access_log_enabled is False


def test_an_access_logger_turned_on_gets_its_line() -> None:
    turned_on = copy.deepcopy(settings.LOGGING)
    turned_on["loggers"]["gunicorn.access"] = {"handlers": ["console"], "level": "INFO"}
    assert logger_with(turned_on).access_log_enabled is True
