"""The audit log page: every recorded step, filtered as the API and the CSV export are."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from pools.audit.filters import AuditFilter
from pools.audit.selectors import audit_event_types
from pools.common.filtering import page_queryset
from pools.common.roles import Capability, require
from pools.core.cluster_scope import any_cluster
from pools.models import AuditEvent


def _audit_filter_values(filterset: AuditFilter) -> dict[str, str]:
    """What the audit page's filter form shows: as typed, but times as a datetime-local
    input reads them (an API-style 2026-01-02T03:04:05+00:00 in the page's time zone)."""
    values = {name: filterset.data.get(name, "").strip() for name in AuditFilter.base_filters}
    cleaned = filterset.form.cleaned_data if filterset.form.is_valid() else {}
    for name in ("since", "until"):
        if cleaned.get(name):
            values[name] = timezone.localtime(cleaned[name]).strftime("%Y-%m-%dT%H:%M")
    return values


@any_cluster
@require(Capability.VIEW)
def audit_log(request: HttpRequest) -> HttpResponse:
    filterset = AuditFilter(request.GET, queryset=AuditEvent.objects.all())
    events, status = page_queryset(filterset, request)
    page = Paginator(events, 100).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "filters": _audit_filter_values(filterset),
        "export_query": query.urlencode(),
        "event_types": audit_event_types(),
        "time_zone": timezone.get_current_timezone_name(),
    }
    return render(request, "pools/audit.html", context, status=status)
