"""The reclaim pages: a pool's policy (pool admins set it) and its candidates, and every
team's held-idle GPU-hours. Thin: they call pools.reclaim."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from pools import reclaim
from pools.common.errors import InvalidInput, Refused
from pools.common.roles import Capability, has_capability, require
from pools.core.reclaim import MAX_HOURS
from pools.models import Pool


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
    form = PolicyForm(request.POST or None, initial=initial)
    if request.method == "POST" and can_set and form.is_valid():
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
    context = {
        "pool": pool,
        "form": form,
        "can_set": can_set,
        "found": reclaim.pool_reclaim_candidates(pool),
        "max_hours": MAX_HOURS,
    }
    return render(request, "pools/reclaim.html", context)


@require(Capability.VIEW)
def teams_idle(request: HttpRequest) -> HttpResponse:
    teams, error = reclaim.teams_idle(now=timezone.now())
    return render(request, "pools/teams_idle.html", {"teams": teams, "metrics_error": error})
