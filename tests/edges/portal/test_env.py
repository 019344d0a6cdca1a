"""Settings parsing: malformed values are refused with the variable's name."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from portal.env import (
    EnvError,
    env_bool,
    env_database,
    env_float,
    env_int,
    env_list,
    env_promql_duration,
    env_rate,
    env_redis_url,
    env_secret,
    env_url,
)
from tests.servers import PrometheusServer


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
    with pytest.raises(EnvError, match=r"^N: expected a whole number of at least 1, got 0"):
        env_int("N", 1, {"N": "0"}, minimum=1)
    with pytest.raises(EnvError, match=r"^N: expected a whole number from 1 to 9, got 10"):
        env_int("N", 1, {"N": "10"}, minimum=1, maximum=9)
    assert env_int("N", 1, {"N": "9"}, minimum=1, maximum=9) == 9


@pytest.mark.parametrize("raw", ["nan", "inf", "-1", "61", "two"])
def test_float_refuses_out_of_range_and_non_finite_values(raw: str) -> None:
    with pytest.raises(EnvError, match=rf"^T: expected a number from 0.1 to 60, got '{raw}'"):
        env_float("T", 2.0, {"T": raw}, minimum=0.1, maximum=60)


def test_list_splits_on_commas_and_refuses_empty_items() -> None:
    assert env_list("HOSTS", [], {"HOSTS": "a.example, b.example"}) == ["a.example", "b.example"]
    with pytest.raises(EnvError, match=r"^HOSTS: expected a comma-separated list, got an empty"):
        env_list("HOSTS", [], {"HOSTS": "a.example,,b"})
    with pytest.raises(EnvError, match=r"^R: expected a comma-separated list of a, b, got c$"):
        env_list("R", [], {"R": "a,c"}, choices={"a", "b"})


@pytest.mark.parametrize("raw", ["1/s", "10/sec", "100/min", "1200/minute", "5/hour", "1/day"])
def test_rate_accepts_what_the_throttle_reads(raw: str) -> None:
    from rest_framework.throttling import SimpleRateThrottle

    assert env_rate("API_TOKEN_RATE", "1/s", {"API_TOKEN_RATE": raw}) == raw
    count, seconds = SimpleRateThrottle.parse_rate(None, raw)  # type: ignore[arg-type]
    assert count >= 1 and seconds in {1, 60, 3600, 86400}


@pytest.mark.parametrize("raw", ["lots", "100", "100/", "0/min", "-1/min", "5/sausage", "1/week"])
def test_rate_refuses_anything_else(raw: str) -> None:
    with pytest.raises(EnvError, match=r"^API_TOKEN_RATE: expected a rate like 100/min"):
        env_rate("API_TOKEN_RATE", "1/s", {"API_TOKEN_RATE": raw})


PROMQL_GOOD = ["1h", "90m", "1h30m", "2d", "1w", "30s", "1d12h", "500ms"]
PROMQL_BAD = ["1 hour", "1.5h", "30m1h", "h", "0s", "0", "1H", "1h 30m", "-1h", "1hour"]


@pytest.mark.parametrize("raw", PROMQL_GOOD)
def test_promql_duration_accepts_prometheus_durations(raw: str) -> None:
    assert env_promql_duration("GPU_IDLE_WINDOW", "1h", {"GPU_IDLE_WINDOW": raw}) == raw


@pytest.mark.parametrize("raw", PROMQL_BAD)
def test_promql_duration_refuses_the_rest(raw: str) -> None:
    with pytest.raises(EnvError, match=r"^GPU_IDLE_WINDOW: expected a PromQL duration above zero"):
        env_promql_duration("GPU_IDLE_WINDOW", "1h", {"GPU_IDLE_WINDOW": raw})


def test_prometheus_agrees_with_the_duration_rule(prometheus: PrometheusServer) -> None:
    """The real parser decides: every duration accepted runs as a range selector, and the
    ones refused for their syntax (not for being zero) fail there too."""

    def parses(window: str) -> bool:
        query = urllib.parse.urlencode({"query": f"avg_over_time(up[{window}])"})
        try:
            with urllib.request.urlopen(f"{prometheus.url}/api/v1/query?{query}", timeout=5):
                return True
        except urllib.error.HTTPError as exc:
            assert exc.code == 400
            return False

    assert all(parses(raw) for raw in PROMQL_GOOD)
    assert not any(parses(raw) for raw in PROMQL_BAD if raw not in {"0s", "0"})


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


def test_secret_length_is_checked_without_showing_it(tmp_path: Path) -> None:
    with pytest.raises(
        EnvError, match=r"^TOKEN: expected a secret of at least 16 characters, got 5$"
    ):
        env_secret("TOKEN", {"TOKEN": "abcde"}, min_length=16)
    short = tmp_path / "token"
    short.write_text("abcde")
    with pytest.raises(EnvError, match=r"^TOKEN_FILE: expected a secret of at least 16"):
        env_secret("TOKEN", {"TOKEN_FILE": str(short)}, min_length=16)
