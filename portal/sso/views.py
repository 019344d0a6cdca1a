"""Sign-in, the provider's callback and sign-out, with single sign-on beside passwords."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render, resolve_url
from mozilla_django_oidc import views as oidc_views

logger = logging.getLogger(__name__)
SSO_FAILED = "Single sign-on did not complete: please try again, or ask an administrator."
PASSWORDS_OFF = "Sign-in with a password is switched off here: use single sign-on."


class LoginView(auth_views.LoginView):
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.LOCAL_LOGIN_ENABLED:
            context = self.get_context_data(form=None, refusal=PASSWORDS_OFF)
            return self.render_to_response(context, status=403)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["local_login_enabled"] = settings.LOCAL_LOGIN_ENABLED
        context["sso_enabled"] = settings.OIDC_ENABLED
        context["sso_provider_name"] = settings.OIDC_PROVIDER_NAME
        return context


class LogoutView(auth_views.LogoutView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        provider_logout = _provider_logout_url(request)  # before the session is flushed
        response: HttpResponse = super().post(request, *args, **kwargs)
        if provider_logout is None:
            return response
        # A page that moves on by itself, not a redirect: a form POST redirected to another
        # origin is refused under a Content-Security-Policy of form-action 'self' (Chromium
        # checks every redirect of a form submission); a meta refresh is not a form's.
        context = {
            "provider_logout_url": provider_logout,
            "sso_provider_name": settings.OIDC_PROVIDER_NAME,
        }
        return render(request, "registration/signed_out_sso.html", context)


def sso_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """404 while single sign-on is off (the library's views read its settings at once)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("single sign-on is not configured")
        return view(request, *args, **kwargs)

    return wrapped


class AuthenticationCallbackView(oidc_views.OIDCAuthenticationCallbackView):  # type: ignore[misc]
    def get(self, request: HttpRequest) -> HttpResponse:
        try:
            return super().get(request)  # type: ignore[no-any-return]
        except (SuspiciousOperation, jwt.InvalidTokenError, requests.RequestException) as exc:
            # A forged or altered token, a replayed state, an unreachable provider: the
            # details go to the log, the person gets the sign-in page again.
            logger.warning("single sign-on refused: %s: %s", type(exc).__name__, exc)
            return self.login_failure()

    def login_failure(self) -> HttpResponseRedirect:
        messages.error(self.request, SSO_FAILED)
        return redirect(settings.LOGIN_URL)


def _provider_logout_url(request: HttpRequest) -> str | None:
    """The provider's end_session_endpoint for someone who signed on there, with the ID
    token as the hint and the portal's sign-in page to come back to."""
    endpoint = getattr(settings, "OIDC_OP_LOGOUT_ENDPOINT", None)
    id_token = request.session.get("oidc_id_token")
    if not settings.OIDC_ENABLED or not endpoint or not id_token:
        return None
    parts = urlsplit(endpoint)
    query = urlencode(
        {
            "id_token_hint": id_token,
            "post_logout_redirect_uri": request.build_absolute_uri(resolve_url(settings.LOGIN_URL)),
        }
    )
    return urlunsplit(parts._replace(query=f"{parts.query}&{query}" if parts.query else query))
