"""Typed reading of the environment.

Every setting comes from here, and a malformed value stops the process with a message that
names the variable: guessing (``DJANGO_DEBUG=maybe`` read as false, a mistyped
``DATABASE_URL`` falling back to SQLite) is how a production portal ends up running on a
throwaway database with debug pages on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from portal.redact import redact_url

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_DATABASE_SCHEMES = {"sqlite", "postgres", "postgresql", "pgsql"}
_REDIS_SCHEMES = {"redis", "rediss"}


class EnvError(ImproperlyConfigured):
    """A malformed variable: its name, what was expected, what was given (redacted)."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(redact_url(f"{name}: {problem}"))
        self.name = name


def _raw(name: str, environ_: dict[str, str] | None) -> str | None:
    source = os.environ if environ_ is None else environ_
    value = source.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_bool(name: str, default: bool, environ_: dict[str, str] | None = None) -> bool:
    value = _raw(name, environ_)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise EnvError(name, f"expected a boolean (true/false, 1/0, yes/no, on/off), got {value!r}")


def env_int(
    name: str,
    default: int,
    environ_: dict[str, str] | None = None,
    *,
    minimum: int | None = None,
) -> int:
    value = _raw(name, environ_)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise EnvError(name, f"expected a whole number, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise EnvError(name, f"must be at least {minimum}, got {number}")
    return number


def env_float(
    name: str, default: float, environ_: dict[str, str] | None = None, *, minimum: float = 0.0
) -> float:
    value = _raw(name, environ_)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise EnvError(name, f"expected a number, got {value!r}") from None
    if number < minimum:
        raise EnvError(name, f"must be at least {minimum}, got {number}")
    return number


def env_str(name: str, default: str, environ_: dict[str, str] | None = None) -> str:
    value = _raw(name, environ_)
    return default if value is None else value


def env_list(name: str, default: list[str], environ_: dict[str, str] | None = None) -> list[str]:
    value = _raw(name, environ_)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(item == "" for item in items):
        raise EnvError(name, f"empty item in comma-separated list {value!r}")
    return items


def env_secret(name: str, environ_: dict[str, str] | None = None) -> str | None:
    """A secret from ``NAME`` or from the file named by ``NAME_FILE`` (a mounted secret)."""
    direct = _raw(name, environ_)
    file_name = _raw(f"{name}_FILE", environ_)
    if direct is not None and file_name is not None:
        raise EnvError(name, f"set either {name} or {name}_FILE, not both")
    if file_name is None:
        return direct
    try:
        content = Path(file_name).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise EnvError(f"{name}_FILE", f"cannot read {file_name}: {exc.strerror}") from None
    if not content:
        raise EnvError(f"{name}_FILE", f"{file_name} is empty")
    return content


def env_url(
    name: str,
    default: str | None,
    environ_: dict[str, str] | None = None,
    *,
    schemes: set[str],
) -> str | None:
    value = _raw(name, environ_)
    if value is None:
        return default
    parts = urlsplit(value)
    if parts.scheme not in schemes:
        allowed = ", ".join(sorted(schemes))
        raise EnvError(name, f"scheme must be one of {allowed}, got {value!r}")
    if not parts.netloc:
        raise EnvError(name, f"no host in {value!r}")
    try:
        parts.port  # noqa: B018 -- urlsplit only validates the port when asked
    except ValueError:
        raise EnvError(name, f"invalid port in {value!r}") from None
    return value


def env_redis_url(name: str, default: str, environ_: dict[str, str] | None = None) -> str:
    url = env_url(name, default, environ_, schemes=_REDIS_SCHEMES)
    assert url is not None
    return url


def env_database(name: str, default: str, environ_: dict[str, str] | None = None) -> dict[str, Any]:
    value = _raw(name, environ_) or default
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme not in _DATABASE_SCHEMES:
        allowed = ", ".join(sorted(_DATABASE_SCHEMES))
        raise EnvError(name, f"scheme must be one of {allowed}, got {value!r}")
    if scheme != "sqlite":
        try:
            urlsplit(value).port  # noqa: B018 -- urlsplit only validates the port when asked
        except ValueError:
            raise EnvError(name, f"invalid port in {value!r}") from None
    try:
        config = environ.Env.db_url_config(value)
    except (ValueError, KeyError) as exc:
        raise EnvError(name, f"cannot parse {value!r}: {exc}") from None
    if not config.get("NAME"):
        raise EnvError(name, f"no database name in {value!r}")
    if scheme == "sqlite":
        # The web server, the worker and beat share the file: wait for a lock instead of
        # failing at once, let readers go on during a write, and take the write lock at the
        # start of a transaction so two writers cannot both read-then-upgrade.
        config["OPTIONS"] = {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    return config
