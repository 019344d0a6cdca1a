"""The kept Content-Security-Policy (portal.csp_policy) says what django-csp's own
middleware says, for every kind of response, and follows the settings when they change."""

from __future__ import annotations

import pytest
from csp.decorators import csp_exempt, csp_replace
from csp.exceptions import CSPNonceError
from csp.middleware import CSPMiddleware
from django.http import HttpResponse
from django.test import RequestFactory

from portal.csp_policy import KeptPolicyCSPMiddleware

HEADERS = ("Content-Security-Policy", "Content-Security-Policy-Report-Only")


def plain_view(request):  # type: ignore[no-untyped-def]
    return HttpResponse("ok")


def nonce_view(request):  # type: ignore[no-untyped-def]
    return HttpResponse(f"<script nonce='{request.csp_nonce}'></script>")


VIEWS = {
    "plain": plain_view,
    "replaced": csp_replace({"img-src": ["'self'", "data:"]})(plain_view),
    "exempt": csp_exempt()(plain_view),
    "nonce": nonce_view,
}


def headers_from(middleware_class, view, path: str = "/x/") -> dict[str, str]:  # type: ignore[no-untyped-def]
    request = RequestFactory().get(path)
    middleware = middleware_class(view)
    response = middleware(request)
    return {name: response[name] for name in HEADERS if name in response}


def same_as_django_csp(view, path: str = "/x/") -> dict[str, str]:  # type: ignore[no-untyped-def]
    kept = headers_from(KeptPolicyCSPMiddleware, view, path)
    expected = headers_from(CSPMiddleware, view, path)
    if "Content-Security-Policy" in expected:
        # Only a nonce differs between two responses: it is new each time.
        kept_policy = kept["Content-Security-Policy"].split("'nonce-")[0]
        assert kept_policy == expected["Content-Security-Policy"].split("'nonce-")[0]
        kept = {**kept, "Content-Security-Policy": kept_policy}
        expected = {**expected, "Content-Security-Policy": kept_policy}
    assert kept == expected
    return kept


@pytest.mark.parametrize("name", VIEWS)
def test_every_kind_of_response_gets_what_django_csp_gives(name: str) -> None:
    headers = same_as_django_csp(VIEWS[name])
    if name == "exempt":
        assert headers == {}
    else:
        assert "default-src 'self'" in headers["Content-Security-Policy"]
    if name == "replaced":
        assert "img-src 'self' data:" in headers["Content-Security-Policy"]


def test_a_change_of_the_settings_changes_the_kept_policy(settings) -> None:  # type: ignore[no-untyped-def]
    middleware = KeptPolicyCSPMiddleware(plain_view)
    first = middleware(RequestFactory().get("/"))["Content-Security-Policy"]
    settings.CONTENT_SECURITY_POLICY = {
        "DIRECTIVES": {"default-src": ["'self'"], "img-src": ["https://images.example"]},
        "EXCLUDE_URL_PREFIXES": ["/open/"],
    }
    settings.CONTENT_SECURITY_POLICY_REPORT_ONLY = {
        "DIRECTIVES": {"default-src": ["'none'"], "report-uri": ["/csp-report/"]}
    }
    changed = middleware(RequestFactory().get("/"))
    assert changed["Content-Security-Policy"] != first
    assert "img-src https://images.example" in changed["Content-Security-Policy"]
    assert "default-src 'none'" in changed["Content-Security-Policy-Report-Only"]
    same_as_django_csp(plain_view)
    # An excluded prefix gets no policy, the report-only one still applies, as django-csp says.
    assert "Content-Security-Policy" not in same_as_django_csp(plain_view, "/open/page")


def test_a_nonce_asked_for_after_the_header_is_written_is_refused() -> None:
    request = RequestFactory().get("/")
    KeptPolicyCSPMiddleware(plain_view)(request)
    with pytest.raises(CSPNonceError):
        str(request.csp_nonce)


def test_the_policy_is_built_once_not_for_every_response() -> None:
    """The same string object on every plain response: built once for the settings (what
    django-csp's own middleware builds anew each time is an equal but new string)."""
    middleware = KeptPolicyCSPMiddleware(plain_view)
    first, second = (middleware(RequestFactory().get("/"))[HEADERS[0]] for _ in range(2))
    assert first is second
    plain = CSPMiddleware(plain_view)
    again = [plain(RequestFactory().get("/"))[HEADERS[0]] for _ in range(2)]
    assert again[0] == first and again[0] is not again[1]  # what the test tells apart
