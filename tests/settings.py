"""The real settings, read from a test environment (production-like: DEBUG off)."""

import os
import socket
import sys
import tempfile
from pathlib import Path


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


# The tests' own Redis listens here (tests/conftest.py starts it); chosen before the Celery
# app reads its settings, so the app publishes to it.
# Under pytest-xdist each worker is its own session with its own Redis: the variable is
# named after the worker, since workers inherit the controller's environment.
REDIS_PORT_VARIABLE = "PORTAL_TEST_REDIS_PORT_" + os.environ.get("PYTEST_XDIST_WORKER", "main")
REDIS_TEST_PORT = os.environ.setdefault(REDIS_PORT_VARIABLE, _free_port())

_TEST_ENV = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "test-only-secret-key-that-is-long-enough-for-the-checks-0123456789",
    "DJANGO_ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
    "DJANGO_SECURE_SSL_REDIRECT": "false",
    "DJANGO_SECURE_COOKIES": "false",
    "DJANGO_HSTS_SECONDS": "0",
    # Each test builds its own history: computed insights are not kept between requests
    # (tests/insights/test_cache.py turns the cache on).
    "INSIGHTS_CACHE_SECONDS": "0",
    # What a page reads from Prometheus, not how fast: on a loaded machine a query may take
    # more than the default 2 s, and the page then says "unavailable" (full runs did). The
    # tests of that wait set their own (tests/edges/metrics/test_prometheus_unavailable.py).
    "PROMETHEUS_TIMEOUT": "10",
}
for _name, _value in _TEST_ENV.items():
    os.environ.setdefault(_name, _value)
# In the pytest process, always this session's own Redis, never one inherited from a parent
# process's environment (an xdist controller's). A web or worker process that a test starts
# keeps the broker the test gave it: a test may put it on a queue of its own.
if "pytest" in sys.modules or "CELERY_BROKER_URL" not in os.environ:
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:{REDIS_TEST_PORT}/0"

from portal.settings import *  # noqa: E402, F403

# A file, not memory, for SQLite's test database: the Celery worker the end-to-end tests
# start as its own process must see the same rows.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(Path(tempfile.gettempdir()) / f"portal-test-{os.getpid()}.sqlite3")
    }

# Tests do not run collectstatic; whitenoise serves from the finders instead.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
WHITENOISE_AUTOREFRESH = True
