"""Typed reading of the environment.

Every setting comes from here, and a malformed value stops the process with a message that
names the variable: guessing (``DJANGO_DEBUG=maybe`` read as false, a mistyped
``DATABASE_URL`` falling back to SQLite) is how a production portal ends up running on a
throwaway database with debug pages on.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import sys
import zoneinfo
from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from pools.core.links import template_problem
from pools.core.redact import redact_url

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


def _range_text(kind: str, minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{kind} from {minimum:g} to {maximum:g}"
    if minimum is not None:
        return f"{kind} of at least {minimum:g}"
    if maximum is not None:
        return f"{kind} of at most {maximum:g}"
    return kind


def env_int(
    name: str,
    default: int,
    environ_: dict[str, str] | None = None,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    value = _raw(name, environ_)
    if value is None:
        return default
    expected = _range_text("a whole number", minimum, maximum)
    try:
        number = int(value)
    except ValueError:
        raise EnvError(name, f"expected {expected}, got {value!r}") from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise EnvError(name, f"expected {expected}, got {number}")
    return number


def env_float(
    name: str,
    default: float,
    environ_: dict[str, str] | None = None,
    *,
    minimum: float = 0.0,
    maximum: float | None = None,
) -> float:
    value = _raw(name, environ_)
    if value is None:
        return default
    expected = _range_text("a number", minimum, maximum)
    try:
        number = float(value)
    except ValueError:
        raise EnvError(name, f"expected {expected}, got {value!r}") from None
    # float() also reads "nan" and "inf", which no comparison refuses.
    if not math.isfinite(number) or number < minimum or (maximum is not None and number > maximum):
        raise EnvError(name, f"expected {expected}, got {value!r}")
    return number


def env_port(name: str, default: int, environ_: dict[str, str] | None = None) -> int:
    return env_int(name, default, environ_, minimum=1, maximum=65535)


def env_str(name: str, default: str, environ_: dict[str, str] | None = None) -> str:
    value = _raw(name, environ_)
    return default if value is None else value


def env_list(
    name: str,
    default: list[str],
    environ_: dict[str, str] | None = None,
    *,
    choices: Collection[str] | None = None,
) -> list[str]:
    value = _raw(name, environ_)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(item == "" for item in items):
        raise EnvError(name, f"expected a comma-separated list, got an empty item in {value!r}")
    unknown = [item for item in items if choices is not None and item not in choices]
    if unknown:
        raise EnvError(
            name,
            f"expected a comma-separated list of {', '.join(sorted(choices or ()))}, "
            f"got {', '.join(unknown)}",
        )
    return items


def env_hosts(name: str, default: list[str], environ_: dict[str, str] | None = None) -> list[str]:
    """Host names for ALLOWED_HOSTS. An IPv6 address is written in brackets, as it arrives
    in a Host header (`[fd00::1]:8000`) and as Django matches it: the chart's `$(POD_IP)`
    expands to the bare address, with which every probe and scrape on an IPv6 cluster
    would answer 400."""
    hosts = []
    for item in env_list(name, default, environ_):
        try:
            address = ipaddress.IPv6Address(item.strip("[]"))
        except ValueError:
            hosts.append(item)
        else:
            hosts.append(f"[{address.compressed}]")
    return hosts


def env_choice(
    name: str, default: str, choices: Collection[str], environ_: dict[str, str] | None = None
) -> str:
    value = _raw(name, environ_)
    if value is None:
        return default
    if value not in choices:
        raise EnvError(name, f"expected one of {', '.join(choices)}, got {value!r}")
    return value


# DRF's throttle reads "N/<period>" by the period's first letter only ("5/sausage" would be
# five a second); accept the spellings that mean what they say.
_RATE = re.compile(r"(?P<count>\d+)/(?P<period>s|sec|second|m|min|minute|h|hour|d|day)")


def env_rate(name: str, default: str, environ_: dict[str, str] | None = None) -> str:
    """A request rate as Django REST framework's throttles read it: ``100/min``."""
    value = _raw(name, environ_)
    if value is None:
        return default
    match = _RATE.fullmatch(value)
    if match is None or int(match["count"]) < 1:
        raise EnvError(
            name,
            f"expected a rate like 100/min (N/s, N/min, N/hour or N/day, N >= 1), got {value!r}",
        )
    return value


# Prometheus's duration grammar (prometheus/common model.ParseDuration): units from the
# largest to the smallest, each at most once, no spaces ("1h30m", "90m", "2d").
_PROMQL_DURATION = re.compile(r"(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?")


def env_promql_duration(name: str, default: str, environ_: dict[str, str] | None = None) -> str:
    """A duration that goes into PromQL as it is (a range selector ``[1h]``)."""
    value = _raw(name, environ_)
    if value is None:
        return default
    if not _PROMQL_DURATION.fullmatch(value) or not any(c.isdigit() and c != "0" for c in value):
        raise EnvError(
            name,
            f"expected a PromQL duration above zero like 1h, 90m or 1h30m "
            f"(units y w d h m s ms, largest first, no spaces), got {value!r}",
        )
    return value


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def env_prometheus_label(name: str, default: str, environ_: dict[str, str] | None = None) -> str:
    value = _raw(name, environ_)
    if value is None:
        return default
    if not _LABEL_NAME.fullmatch(value):
        raise EnvError(
            name, f"expected a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*), got {value!r}"
        )
    return value


def env_time_zone(name: str, default: str, environ_: dict[str, str] | None = None) -> str:
    value = _raw(name, environ_)
    if value is None:
        return default
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise EnvError(
            name, f"expected an IANA time zone like UTC or Europe/Paris, got {value!r}"
        ) from None
    return value


def env_origins(name: str, environ_: dict[str, str] | None = None) -> list[str]:
    """Origins (``https://portal.example.com``) as Django's CSRF check compares them."""
    origins = env_list(name, [], environ_)
    for origin in origins:
        parts = urlsplit(origin)
        if parts.scheme not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}:
            raise EnvError(
                name, f"expected origins like https://portal.example.com, got {origin!r}"
            )
    return origins


def env_secret(
    name: str, environ_: dict[str, str] | None = None, *, min_length: int = 1
) -> str | None:
    """A secret from ``NAME`` or from the file named by ``NAME_FILE`` (a mounted secret).
    A message about it never shows the value."""
    direct = _raw(name, environ_)
    file_name = _raw(f"{name}_FILE", environ_)
    if direct is not None and file_name is not None:
        raise EnvError(name, f"set either {name} or {name}_FILE, not both")
    if file_name is None:
        secret, source = direct, name
    else:
        try:
            secret = Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise EnvError(f"{name}_FILE", f"cannot read {file_name}: {exc.strerror}") from None
        if not secret:
            raise EnvError(f"{name}_FILE", f"{file_name} is empty")
        source = f"{name}_FILE"
    if secret is not None and len(secret) < min_length:
        raise EnvError(
            source, f"expected a secret of at least {min_length} characters, got {len(secret)}"
        )
    return secret


def env_file(name: str, environ_: dict[str, str] | None = None) -> str:
    """The path of a file the process reads later (a CA bundle, a certificate), checked to be
    readable now; empty when unset."""
    value = _raw(name, environ_)
    if value is None:
        return ""
    try:
        with open(value, "rb"):
            pass
    except OSError as exc:
        raise EnvError(name, f"cannot read {value}: {exc.strerror}") from None
    return value


# An HTTP header name (RFC 9110 token characters).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Set by the portal itself (from their own variables or by HTTP), never through a list.
_RESERVED_HEADERS = {"authorization", "host", "content-length", "content-type", "cookie"}


def env_headers(name: str, environ_: dict[str, str] | None = None) -> dict[str, str]:
    """Extra HTTP headers as `Name=value` pairs, comma-separated (`X-Scope-OrgID=team-a`)."""
    value = _raw(name, environ_)
    if value is None:
        return {}
    headers: dict[str, str] = {}
    for item in value.split(","):
        header, sep, content = (part.strip() for part in item.partition("="))
        if not sep or not content or not _HEADER_NAME.fullmatch(header):
            raise EnvError(
                name,
                "expected comma-separated Name=value pairs like X-Scope-OrgID=team-a, got "
                f"{item.strip()!r}",
            )
        if header.lower() in _RESERVED_HEADERS:
            raise EnvError(name, f"{header} is not set here (got it in {name})")
        if any(ord(c) < 32 or ord(c) == 127 for c in content):
            raise EnvError(name, f"the value of {header} has a control character")
        if header.lower() in (h.lower() for h in headers):
            raise EnvError(name, f"{header} is given twice")
        headers[header] = content
    return headers


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


def settings_or_exit(*, exit_code: int = 2) -> None:
    """Load Django's settings now. A configuration error becomes one line on stderr and the
    exit status ``exit_code``: a traceback from deep inside Django hides the one fact an
    operator needs (which variable, what it should be)."""
    from django.conf import settings

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    try:
        settings.INSTALLED_APPS  # noqa: B018 -- touching a setting imports the module
    except ImproperlyConfigured as exc:
        message = redact_url(" ".join(str(exc).split()))
        print(f"configuration error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(exit_code) from None


def env_link_template(
    name: str, placeholder: str, environ_: dict[str, str] | None = None
) -> str | None:
    """A URL template with one placeholder (``https://grafana/d/x?var-Hostname={node}``)."""
    value = _raw(name, environ_)
    if value is None:
        return None
    problem = template_problem(value, placeholder)
    if problem is not None:
        raise EnvError(name, f"{problem}, got {value!r}")
    return value


_EMAIL = re.compile(r"[^@\s<>]+@[^@\s<>]+")


def env_email(name: str, default: str, environ_: dict[str, str] | None = None) -> str:
    """An address (``portal@example.com``) or a name with one (``GPU portal <portal@…>``)."""
    value = _raw(name, environ_)
    if value is None:
        return default
    inner = value[value.find("<") + 1 : -1] if value.endswith(">") and "<" in value else value
    if not _EMAIL.fullmatch(inner.strip()):
        raise EnvError(
            name, f"expected an address like portal@example.com or Name <portal@…>, got {value!r}"
        )
    return value


def env_plugin_configs(
    name: str, default: str = "", environ_: dict[str, str] | None = None
) -> dict[str, Any]:
    """The device plugin's sharing configurations by name (pools.core.plugin_configs)."""
    from pools.core.plugin_configs import PluginConfigsError, parse_plugin_configs

    try:
        return dict(parse_plugin_configs(env_str(name, default, environ_)))
    except PluginConfigsError as error:
        raise EnvError(name, str(error)) from None
