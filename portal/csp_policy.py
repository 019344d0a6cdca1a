"""django-csp's middleware, keeping the policy string it builds.

django-csp builds the Content-Security-Policy header again for every response: the
policy's parts copied into dictionaries and joined, once for the policy and once for its
report-only twin. For a response whose view did not change the policy (csp_replace,
csp_update, ...) and whose page used no nonce, the result is the same string each time,
a function of the settings alone; it is built once per value of those settings. Every
other response is left to django-csp as it is.
"""

from __future__ import annotations

import http.client
from typing import Any

from csp.middleware import HEADER, HEADER_REPORT_ONLY, CheckableLazyObject, CSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.http import HttpRequest
from django.http.response import HttpResponseBase

# Where a view's own policy is kept on its response (django-csp's decorators).
OWN_POLICY = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
)
DEBUG_PAGES = (http.client.INTERNAL_SERVER_ERROR, http.client.NOT_FOUND)


class KeptPolicyCSPMiddleware(CSPMiddleware):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kept: tuple[str, tuple[str, str]] | None = None

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if getattr(request, "_csp_nonce", None) is not None or any(
            getattr(response, name, None) is not None for name in OWN_POLICY
        ):
            return super().process_response(request, response)
        if response.status_code in DEBUG_PAGES and settings.DEBUG:
            return response  # Django's debug pages, as django-csp leaves them
        policy, report_only = self._policies()
        for header, text, exempt, setting in (
            (HEADER, policy, "_csp_exempt", "CONTENT_SECURITY_POLICY"),
            (
                HEADER_REPORT_ONLY,
                report_only,
                "_csp_exempt_ro",
                "CONTENT_SECURITY_POLICY_REPORT_ONLY",
            ),
        ):
            if not text or header in response or getattr(response, exempt, False):
                continue
            prefixes = (getattr(settings, setting, None) or {}).get("EXCLUDE_URL_PREFIXES") or ()
            if not request.path_info.startswith(tuple(prefixes)):
                response[header] = text
        # As django-csp does: a nonce asked for after the header was written is an error.
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)  # type: ignore[attr-defined]
        return response

    def _policies(self) -> tuple[str, str]:
        """The policy and the report-only policy for the settings as they are now (tests and
        deployments may change them; a change builds them again)."""
        given = repr(
            (
                getattr(settings, "CONTENT_SECURITY_POLICY", None),
                getattr(settings, "CONTENT_SECURITY_POLICY_REPORT_ONLY", None),
            )
        )
        kept = self._kept
        if kept is None or kept[0] != given:
            kept = (given, (build_policy(), build_policy(report_only=True)))
            self._kept = kept
        return kept[1]
