"""Every URL in the URL conf needs a login, except the few that must not."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

# The single sign-on start and callback are part of signing in (404 while it is off);
# /metrics and /metrics/pools ask Prometheus for a bearer token instead
# (tests/edges/portal/test_metrics.py, tests/edges/metrics/test_pool_sums.py),
# and a pool's iCalendar feed for its feed key (tests/bookings/test_booking_api.py).
PUBLIC = {
    "pool-calendar-ics",
    "login",
    "healthz",
    "readyz",
    "metrics",
    "metrics-pools",
    "favicon",
    "oidc_authentication_init",
    "oidc_authentication_callback",
}
# Sample values for route converters, so that parametrised routes are walked too.
SAMPLES = {
    "int": "1",
    "str": "sample",
    "slug": "sample",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "path": "sample",
}


def walk(patterns: list, prefix: str = "") -> Iterator[tuple[str, str | None]]:  # type: ignore[type-arg]
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.name


def concrete(route: str) -> str | None:
    """A request path for a route, or None for regex routes we cannot fill in."""
    if route.startswith("^") or "(?P" in route:
        route = re.sub(r"\(\?P<\w+>[^)]*\)", "1", route).lstrip("^").rstrip("$").replace("\\", "")
        if any(c in route for c in "()[]*+?"):
            return None

    def fill(match: re.Match[str]) -> str:
        kind = match.group(1) or "str"
        return SAMPLES.get(kind, "sample")

    return "/" + re.sub(r"<(?:(\w+):)?\w+>", fill, route)


ROUTES = sorted(set(walk(get_resolver().url_patterns)), key=str)
PRIVATE = [(route, name) for route, name in ROUTES if name not in PUBLIC]


def test_the_url_conf_is_walked() -> None:
    names = {name for _, name in ROUTES}
    assert {"home", "login", "healthz", "readyz"} <= names


@pytest.mark.django_db
@pytest.mark.parametrize(("route", "name"), PRIVATE, ids=[r for r, _ in PRIVATE])
def test_anonymous_get_is_sent_to_a_login_page(
    client: Client, route: str, name: str | None
) -> None:
    path = concrete(route)
    if path is None:
        pytest.skip(f"regex route {route!r} cannot be filled in automatically")
    response = client.get(path)
    if path.startswith("/api/") and path != "/api/docs/":
        # The API answers for itself: 401 in its error shape, never a login page.
        assert response.status_code == 401, f"{path} answered {response.status_code}"
        return
    assert response.status_code == 302, f"{path} answered {response.status_code} without login"
    assert "login" in response["Location"]


@pytest.mark.django_db
def test_public_endpoints_answer_without_login(client: Client) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/login/").status_code == 200
    assert client.get("/readyz").status_code in (200, 503)
