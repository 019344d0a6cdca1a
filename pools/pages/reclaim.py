"""The reclaim pages: a pool's policy (pool admins set it), its candidates and reclaims, one
reclaim with its steps (file, approve, reject), and every team's held-idle GPU-hours. Thin:
they call pools.reclaim."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from pools import reclaim
from pools.common.errors import InvalidInput, Refused
from pools.common.roles import Capability, has_capability, refusal_reason, require
from pools.core.reclaim import MAX_HOURS
from pools.models import Pool, Reclaim
from pools.pages.cluster_links import opens_in_its_cluster
from pools.reclaim import requests as reclaim_requests

RECENT_RECLAIMS = 50


class PolicyForm(forms.Form):
    enabled = forms.BooleanField(required=False, label="On")
    below_percent = forms.FloatField(label="Held under (%)")
    for_hours = forms.IntegerField(label="for (hours)")
    grace_hours = forms.IntegerField(label="Owner's grace (hours)")


@require(Capability.VIEW)
def pool_reclaim(request: HttpRequest, name: str) -> HttpResponse:
    pool = get_object_or_404(Pool.objects.active(), name=name)
    can_set = has_capability(request.user, Capability.EDIT_POOLS)
    current = reclaim.reclaim_policy_of(pool)
    initial = {
        "enabled": current.enabled,
        "below_percent": current.below_percent,
        "for_hours": current.for_hours,
        "grace_hours": current.grace_hours,
    }
    if request.method == "POST" and not can_set:
        raise PermissionDenied(refusal_reason(Capability.EDIT_POOLS))
    form = PolicyForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            reclaim.reclaim_policy_set(pool=pool, user=request.user, **form.cleaned_data)
        except InvalidInput as exc:
            for field, message in exc.fields.items():
                form.add_error(field, message)
        except Refused as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, "Reclaim policy saved.")
            return redirect("pool-reclaim", name=name)
    reclaims = list(Reclaim.objects.filter(pool=pool)[:RECENT_RECLAIMS])
    open_ones = {r.pod_uid: r for r in Reclaim.objects.filter(pool=pool, finished_at__isnull=True)}
    found = reclaim.pool_reclaim_candidates(pool)
    context = {
        "pool": pool,
        "form": form,
        "can_set": can_set,
        "found": found,
        "rows": [(c, open_ones.get(c.pod.uid)) for c in found.candidates],
        "reclaims": reclaims,
        "max_hours": MAX_HOURS,
    }
    return render(request, "pools/reclaim.html", context)


@require(Capability.VIEW)
def teams_idle(request: HttpRequest) -> HttpResponse:
    teams, error = reclaim.teams_idle(now=timezone.now())
    return render(request, "pools/teams_idle.html", {"teams": teams, "metrics_error": error})


@opens_in_its_cluster(Reclaim, "pool__cluster")
@require(Capability.VIEW)
def reclaim_detail(request: HttpRequest, pk: int) -> HttpResponse:
    found = get_object_or_404(
        Reclaim.objects.select_related("pool", "requested_by", "decided_by"), pk=pk
    )
    user, state = request.user, found.state
    is_open = found.finished_at is None
    context = {
        "reclaim": found,
        "can_file": is_open
        and state == Reclaim.State.DUE
        and has_capability(user, Capability.REQUEST_MOVE),
        "can_approve": is_open
        and state == Reclaim.State.REQUESTED
        and found.requested_by_id != user.pk
        and has_capability(user, Capability.APPROVE_MOVE),
        "can_reject": is_open
        and state in (Reclaim.State.NOTICED, Reclaim.State.DUE, Reclaim.State.REQUESTED)
        and has_capability(user, Capability.APPROVE_MOVE),
        "events": found.events.order_by("-at", "-id")[:100],
    }
    return render(request, "pools/reclaim_detail.html", context)


@require_POST
@require(Capability.VIEW)
def reclaim_step(request: HttpRequest, pk: int, step: str) -> HttpResponse:
    get_object_or_404(Reclaim, pk=pk)
    reason, now, user = request.POST.get("reason", ""), timezone.now(), request.user
    try:
        if step == "request":
            reclaim_requests.reclaim_request(pk, user=user, reason=reason, now=now)
        elif step == "approve":
            reclaim_requests.reclaim_approve(pk, approver=user, reason=reason, now=now)
        else:
            reclaim_requests.reclaim_reject(pk, approver=user, reason=reason, now=now)
    except Refused as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Reclaim #{pk}: {step} done.")
    return redirect("reclaim-detail", pk=pk)
