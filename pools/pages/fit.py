"""Pages of the fit check: will my job land, and if not, why? And the GPU pods waiting now."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from pools.common.errors import WorkflowError
from pools.common.roles import Capability, require
from pools.core.fit.workloads import JSON
from pools.fit.pending import (
    PENDING_SORT_LABELS,
    PENDING_SORTS,
    pending_groups,
    pending_pod_names,
    pending_pods,
)
from pools.fit.service import FitCheck, PodRef, fit_check_run
from pools.pages.forms import FitForm


@require(Capability.VIEW)
def fit_check(request: HttpRequest) -> HttpResponse:
    """GET ?pod=namespace/name checks that pod at once (the Pending lists link here); POST
    checks the form's manifest, file or pod; `download=<pool>` answers with that pool's fix."""
    data = request.POST if request.method == "POST" else request.GET
    form = (
        FitForm(data, request.FILES or None)
        if data.get("pod") or request.method == "POST"
        else FitForm()
    )
    check: FitCheck | None = None
    status = 200
    if form.is_bound and form.is_valid():
        pod = form.cleaned_data["pod"]
        try:
            check = fit_check_run(
                manifest=form.cleaned_data["manifest"] or form.cleaned_data["upload"] or None,
                pod=PodRef(*pod) if pod else None,
            )
        except WorkflowError as error:
            for field, problems in error.fields.items():
                if field in ("manifest", "pod"):
                    for problem in problems:
                        form.add_error("pod" if pod else "manifest", problem)
            status = error.status
    elif form.is_bound:
        status = 400
    download = data.get("download", "")
    if check is not None and download in check.report.fixes:
        return _download(check, download)
    context = {"form": form, "check": check, "pending": pending_pod_names()}
    return render(request, "pools/fit.html", context, status=status)


def _download(check: FitCheck, pool: str) -> HttpResponse:
    fix = check.report.fixes[pool]
    json = check.format == JSON
    response = HttpResponse(
        fix.text, content_type="application/json" if json else "application/yaml"
    )
    name = f"{check.pod.name if check.pod else 'manifest'}-{pool}.{'json' if json else 'yaml'}"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@require(Capability.VIEW)
def pending(request: HttpRequest) -> HttpResponse:
    sort = request.GET.get("sort", "wait")
    status = 200
    if sort not in PENDING_SORTS:
        messages.error(request, f"sort: one of {', '.join(PENDING_SORTS)}, not {sort!r}.")
        sort, status = "wait", 400
    pods = pending_pods(now=timezone.now())
    context = {
        "groups": pending_groups(pods, sort=sort),
        "pending_total": len(pods),
        "sort": sort,
        "sorts": list(PENDING_SORT_LABELS.items()),
    }
    return render(request, "pools/pending.html", context, status=status)
