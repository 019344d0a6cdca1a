"""Personal API tokens: create (the secret is shown once), list, revoke."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from pools.common.roles import Capability, require
from pools.models import ApiToken
from pools.tokens import TokenInvalid, token_create, token_revoke

# Where a new secret waits, between the POST that made it and the page that shows it once.
SHOW_ONCE_SESSION_KEY = "new_api_token"


@never_cache  # it shows a new token's secret: no browser or proxy may keep a copy
@require(Capability.VIEW)
def tokens(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        # Post, redirect, get: a reload of the page does not make a second token.
        form = TokenForm(request.POST)
        if not form.is_valid():
            for field, errors in form.errors.items():
                messages.error(request, f"{form.fields[field].label}: {' '.join(errors)}")
        else:
            try:
                _, request.session[SHOW_ONCE_SESSION_KEY] = token_create(
                    user=request.user,
                    name=form.cleaned_data["name"],
                    expires_at=form.cleaned_data["expires_at"],
                )
            except TokenInvalid as exc:
                messages.error(request, f"Expires: {exc}")
        return redirect("tokens")
    return render(
        request,
        "pools/tokens.html",
        {
            "tokens": ApiToken.objects.filter(user=request.user),
            "new_secret": request.session.pop(SHOW_ONCE_SESSION_KEY, None),
            "now": timezone.now(),
        },
    )


@require_POST
@require(Capability.VIEW)
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    if token_revoke(user=request.user, token_id=pk):
        messages.success(request, "Token revoked: requests with it now get 401.")
    else:
        messages.error(request, "No such active token of yours.")
    return redirect("tokens")


class TokenForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=100,
        error_messages={"required": "Give the token a name (what will use it?)."},
    )
    expires_at = forms.DateTimeField(
        label="Expires",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="Optional (UTC): the token is refused from then on.",
    )
