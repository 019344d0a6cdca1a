"""/favicon.ico: browsers ask for it on their own, on every page and before any login."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.views.decorators.http import require_GET


@login_not_required
@require_GET
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    # Resolved per request: the static file's name carries its hash in production.
    return HttpResponseRedirect(static("portal/favicon.svg"))
