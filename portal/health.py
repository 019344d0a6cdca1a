"""Liveness and readiness endpoints for probes and load balancers (no login)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from portal import readiness


@login_not_required
@require_GET
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain")


@login_not_required
@require_GET
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    report = readiness.readiness_report(required=settings.READYZ_REQUIRED)
    return JsonResponse(report.as_dict(), status=200 if report.ready else 503)
