"""Pages of the fit check: will my job land, and if not, why? And the GPU pods waiting now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from pools.common.cluster_access import current_cluster, served_clusters
from pools.common.errors import Refused
from pools.common.roles import Capability, require
from pools.core.fit.cluster import NO_POOL
from pools.core.fit.workloads import JSON
from pools.fit.fleet import ClusterFit, fleet_fit_run
from pools.fit.pending import (
    PENDING_SORT_LABELS,
    PENDING_SORTS,
    pending_groups,
    pending_pod_names,
    pending_pods,
)
from pools.fit.service import FitCheck, PodName, fit_check_run


@require(Capability.VIEW)
def fit_check(request: HttpRequest) -> HttpResponse:
    """GET ?pod=namespace/name checks that pod at once (the Pending lists link here); POST
    checks the form's manifest, file or pod; `download=<pool>` answers with that pool's fix.
    A manifest is checked in every cluster served, the page's own in detail."""
    data = request.POST if request.method == "POST" else request.GET
    form = (
        FitForm(data, request.FILES or None)
        if data.get("pod") or request.method == "POST"
        else FitForm()
    )
    download = data.get("download", "")
    check: FitCheck | None = None
    fleet: list[ClusterFit] = []
    status = 200
    if form.is_bound and form.is_valid():
        pod = form.cleaned_data["pod"]
        try:
            check, fleet = _checked(form, across_fleet=not download)
        except Refused as error:
            for field, problems in error.fields.items():
                if field in ("manifest", "pod"):
                    for problem in problems:
                        form.add_error("pod" if pod else "manifest", problem)
            status = error.status
    elif form.is_bound:
        status = 400
    if check is not None and download in check.report.fixes:
        return _download(check, download)
    context = {
        "form": form,
        "check": check,
        "fleet": [FleetFitRow.of(fit) for fit in fleet],
        "pending": pending_pod_names(),
    }
    return render(request, "pools/fit.html", context, status=status)


def _checked(form: FitForm, *, across_fleet: bool) -> tuple[FitCheck, list[ClusterFit]]:
    """The page's cluster's check, and every cluster's when the form gave a manifest and the
    portal serves several (a pod belongs to one cluster; a download wants one pool's fix).
    The page's own check is taken from the fleet's run, not run twice."""
    pod = form.cleaned_data["pod"]
    manifest = form.cleaned_data["manifest"] or form.cleaned_data["upload"] or None
    if manifest is None or not across_fleet or len(served_clusters()) < 2:
        return fit_check_run(manifest=manifest, pod=PodName(*pod) if pod else None), []
    fleet = fleet_fit_run(manifest=manifest)
    here = current_cluster()
    return next(fit.check for fit in fleet if fit.cluster == here), fleet


@dataclass(frozen=True)
class FleetFitRow:
    """One cluster's line of "Across the fleet": its verdict, its pools named as the page
    names them, and the page in that cluster, where the same manifest is checked in detail."""

    cluster: str
    fits_now: bool
    pools_now: list[str]
    pools_with_a_fix: list[str]
    action: str
    shown_below: bool  # the page's own cluster, whose detailed result follows

    @classmethod
    def of(cls, fit: ClusterFit) -> FleetFitRow:
        return cls(
            cluster=fit.cluster,
            fits_now=fit.fits_now,
            pools_now=[_pool_label(pool) for pool in fit.pools_now],
            pools_with_a_fix=[_pool_label(pool) for pool in sorted(fit.check.report.fixes)],
            # Always named, the portal's own too: without it the session's last cluster answers.
            action=f"{reverse('fit-check')}?{urlencode({'cluster': fit.cluster})}",
            shown_below=fit.cluster == current_cluster(),
        )


def _pool_label(pool: str) -> str:
    return "nodes in no pool" if pool == NO_POOL else pool


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


class FitForm(forms.Form):
    """The fit check's input: a manifest pasted or uploaded, or a Pending pod by name."""

    manifest = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false"}),
        help_text="YAML or JSON: Pod, Deployment, StatefulSet, Job, CronJob, PyTorchJob, "
        "MPIJob, RayCluster, JobSet, Volcano Job; gangs sized by their own field, a Volcano "
        "PodGroup or YuniKorn task groups; several documents allowed.",
    )
    upload = forms.FileField(required=False, label="or upload a file")
    pod = forms.CharField(
        required=False,
        max_length=320,
        label="or a Pending pod",
        widget=forms.TextInput(attrs={"list": "pending-pods", "placeholder": "namespace/name"}),
        help_text="namespace/name of a pod the inventory holds.",
    )
    MAX_UPLOAD_BYTES = 1_000_000

    def clean_upload(self) -> str | None:
        upload = self.cleaned_data.get("upload")
        if not upload:
            return None
        if upload.size > self.MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size} bytes; the fit check reads at most "
                f"{self.MAX_UPLOAD_BYTES}."
            )
        try:
            return str(upload.read().decode("utf-8"))
        except UnicodeDecodeError:
            raise forms.ValidationError("The file is not UTF-8 text.") from None

    def clean_pod(self) -> tuple[str, str] | None:
        text = (self.cleaned_data.get("pod") or "").strip()
        if not text:
            return None
        namespace, slash, name = text.partition("/")
        if not slash or not namespace or not name:
            raise forms.ValidationError(f"Write the pod as namespace/name, got {text!r}.")
        return namespace, name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:  # a field refused (a file too large) was given: say only what is wrong
            return data
        given = [k for k in ("manifest", "upload", "pod") if data.get(k)]
        if len(given) != 1:
            raise forms.ValidationError(
                "Give one of: a manifest, a file or a pod"
                + (f" (got {', '.join(given)})." if given else ".")
            )
        return data
