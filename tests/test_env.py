"""Settings parsing: malformed values are refused with the variable's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from portal.env import (
    EnvError,
    env_bool,
    env_database,
    env_int,
    env_list,
    env_redis_url,
    env_secret,
    env_url,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("1", True),
        ("YES", True),
        ("on", True),
        ("false", False),
        ("0", False),
        ("No", False),
        ("off", False),
    ],
)
def test_bool_accepts_the_usual_spellings(raw: str, expected: bool) -> None:
    assert env_bool("DJANGO_DEBUG", not expected, {"DJANGO_DEBUG": raw}) is expected


def test_bool_refuses_maybe_and_names_the_variable() -> None:
    with pytest.raises(EnvError, match=r"^DJANGO_DEBUG: expected a boolean .* got 'maybe'"):
        env_bool("DJANGO_DEBUG", False, {"DJANGO_DEBUG": "maybe"})


def test_unset_and_blank_values_take_the_default() -> None:
    assert env_bool("X", True, {}) is True
    assert env_bool("X", False, {"X": "  "}) is False
    assert env_int("N", 7, {}) == 7


def test_int_refuses_text_and_values_below_the_minimum() -> None:
    with pytest.raises(EnvError, match=r"^N: expected a whole number, got '3s'"):
        env_int("N", 1, {"N": "3s"})
    with pytest.raises(EnvError, match=r"^N: must be at least 1, got 0"):
        env_int("N", 1, {"N": "0"}, minimum=1)


def test_list_splits_on_commas_and_refuses_empty_items() -> None:
    assert env_list("HOSTS", [], {"HOSTS": "a.example, b.example"}) == ["a.example", "b.example"]
    with pytest.raises(EnvError, match=r"^HOSTS: empty item"):
        env_list("HOSTS", [], {"HOSTS": "a.example,,b"})


def test_secret_from_file(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("s3cret-from-a-mounted-file\n")
    assert env_secret("KEY", {"KEY_FILE": str(secret)}) == "s3cret-from-a-mounted-file"
    assert env_secret("KEY", {"KEY": "direct"}) == "direct"
    assert env_secret("KEY", {}) is None


def test_secret_file_problems_name_the_file_variable(tmp_path: Path) -> None:
    with pytest.raises(EnvError, match=r"^KEY_FILE: cannot read"):
        env_secret("KEY", {"KEY_FILE": str(tmp_path / "missing")})
    (tmp_path / "empty").write_text("")
    with pytest.raises(EnvError, match=r"^KEY_FILE: .* is empty"):
        env_secret("KEY", {"KEY_FILE": str(tmp_path / "empty")})
    with pytest.raises(EnvError, match=r"^KEY: set either KEY or KEY_FILE, not both"):
        env_secret("KEY", {"KEY": "a", "KEY_FILE": str(tmp_path / "empty")})


def test_database_url_sqlite_and_postgres() -> None:
    sqlite = env_database("DATABASE_URL", "sqlite:////tmp/portal.db", {})
    assert sqlite["ENGINE"] == "django.db.backends.sqlite3"
    assert sqlite["NAME"] == "/tmp/portal.db"
    pg = env_database("DATABASE_URL", "", {"DATABASE_URL": "postgres://u:p@db.example:5432/portal"})
    assert pg["ENGINE"] == "django.db.backends.postgresql"
    assert (pg["HOST"], pg["PORT"], pg["NAME"], pg["USER"]) == ("db.example", 5432, "portal", "u")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("not a url", "scheme must be one of"),
        ("mysql://u@h/db", "scheme must be one of"),
        ("postgres://u@h/", "no database name"),
        ("postgres://u@h:port/db", "invalid port"),
    ],
)
def test_malformed_database_url_is_refused(raw: str, problem: str) -> None:
    with pytest.raises(EnvError, match=rf"^DATABASE_URL: {problem}"):
        env_database("DATABASE_URL", "sqlite:///x", {"DATABASE_URL": raw})


def test_urls_are_checked_for_scheme_host_and_port() -> None:
    assert env_redis_url("B", "redis://d", {"B": "redis://:pw@r:6380/1"}) == "redis://:pw@r:6380/1"
    with pytest.raises(EnvError, match=r"^CELERY_BROKER_URL: scheme must be one of redis, rediss"):
        env_redis_url("CELERY_BROKER_URL", "redis://d", {"CELERY_BROKER_URL": "amqp://x"})
    with pytest.raises(EnvError, match=r"^PROMETHEUS_URL: no host"):
        env_url("PROMETHEUS_URL", None, {"PROMETHEUS_URL": "http://"}, schemes={"http"})
    with pytest.raises(EnvError, match=r"^PROMETHEUS_URL: invalid port"):
        env_url("PROMETHEUS_URL", None, {"PROMETHEUS_URL": "http://p:99999"}, schemes={"http"})
