"""/metrics: the portal's own figures in Prometheus's text format, for a bearer token.

Without METRICS_TOKEN the endpoint does not exist (404), so it is never public by accident;
a missing or wrong token is 401. No login: Prometheus has no session. No HTTPS redirect
(SECURE_REDIRECT_EXEMPT): Prometheus scrapes the pod over plain HTTP inside the cluster.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from pools.fleet.membership_export import membership_text
from portal.metrics_collectors import ScrapeTimeFigures
from portal.metrics_process import bearer_token_ok, process_registry


def unauthorized() -> HttpResponse:
    response = HttpResponse(
        "a bearer token is required (Authorization: Bearer <METRICS_TOKEN>)\n",
        status=401,
        content_type="text/plain",
    )
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def _refused(request: HttpRequest) -> HttpResponse | None:
    if not settings.METRICS_TOKEN:
        raise Http404("metrics are not exposed: METRICS_TOKEN is not set")
    if not bearer_token_ok(request.headers.get("Authorization", ""), settings.METRICS_TOKEN):
        return unauthorized()
    return None


@login_not_required
@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    if (refusal := _refused(request)) is not None:
        return refusal
    registry = process_registry()
    registry.register(ScrapeTimeFigures())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)


@login_not_required
@require_GET
@never_cache
def pool_membership(request: HttpRequest) -> HttpResponse:
    """Each present node's pool in the cluster `?cluster=` names (the portal's own without
    it), for the rules that add up each pool's figures (pools.core.pool_sums)."""
    if (refusal := _refused(request)) is not None:
        return refusal
    return HttpResponse(membership_text(), content_type=CONTENT_TYPE_PLAIN_0_0_4)
