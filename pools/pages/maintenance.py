"""The maintenance pages: every maintenance, one maintenance's waves with the operator's
buttons (confirm the step, pause, resume, cancel), and the form that starts one from a pool
(with its headroom beside it). Thin: they call pools.maintenance.waves."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from pools.common.errors import InvalidInput, Refused
from pools.common.roles import Capability, require
from pools.core.waves import (
    MAX_DRAIN_DEADLINE_SECONDS,
    MAX_STEP_LENGTH,
    MAX_WAVE_SIZE,
    MIN_DRAIN_DEADLINE_SECONDS,
)
from pools.maintenance import waves
from pools.maintenance.headroom import pool_headroom
from pools.models import FREE_TEXT_MAX_LENGTH, Maintenance, MaintenanceNode, Node, Pool
from pools.pages.cluster_links import opens_in_its_cluster

EVENTS_SHOWN = 200


class MaintenanceForm(forms.Form):
    nodes = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every node of the pool.",
    )
    wave_size = forms.IntegerField(
        min_value=1, max_value=MAX_WAVE_SIZE, initial=1, label="Wave: at most"
    )
    wave_percent = forms.TypedChoiceField(
        choices=[("", "nodes"), ("1", "% of the nodes")],
        coerce=bool,
        required=False,
        empty_value=False,
        label="counted in",
    )
    hold = forms.ChoiceField(choices=Maintenance.Hold.choices, label="Hold each wave")
    step = forms.CharField(
        max_length=MAX_STEP_LENGTH,
        required=False,
        label="Step the operator confirms",
        help_text="For example: driver upgraded to 570.",
    )
    hold_label = forms.CharField(
        max_length=400,
        required=False,
        label="Or: node label",
        help_text="key=value, or a key whose value changes (nvidia.com/cuda.driver.major).",
    )
    drain_deadline_minutes = forms.IntegerField(
        min_value=max(1, MIN_DRAIN_DEADLINE_SECONDS // 60),
        max_value=MAX_DRAIN_DEADLINE_SECONDS // 60,
        initial=30,
        label="Drain deadline (minutes)",
        help_text="A wave still draining then pauses the maintenance.",
    )
    reason = forms.CharField(
        max_length=FREE_TEXT_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
    )

    def __init__(self, *args: object, node_names: list[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["nodes"].choices = [(n, n) for n in node_names]


@require(Capability.VIEW)
def maintenance_list(request: HttpRequest) -> HttpResponse:
    found = Maintenance.objects.select_related("pool", "started_by")[:100]
    return render(
        request,
        "pools/maintenance_list.html",
        {"maintenances": found, "can_maintain": waves.can_maintain(request.user)},
    )


@require(Capability.EDIT_POOLS)
def maintenance_new(request: HttpRequest, name: str) -> HttpResponse:
    pool = get_object_or_404(Pool.objects.active(), name=name)
    names = list(
        Node.objects.present().filter(pool=pool).order_by("name").values_list("name", flat=True)
    )
    form = MaintenanceForm(request.POST or None, node_names=names)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            maintenance = waves.maintenance_start(
                pool=pool,
                user=request.user,
                reason=data["reason"],
                wave_size=data["wave_size"],
                wave_percent=data["wave_percent"],
                hold=data["hold"],
                hold_label=data["hold_label"],
                step=data["step"],
                drain_deadline_seconds=data["drain_deadline_minutes"] * 60,
                nodes=data["nodes"] or None,
            )
        except InvalidInput as exc:
            for field, message in exc.fields.items():
                form.add_error(field if field in form.fields else None, message)
        except Refused as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Maintenance #{maintenance.pk} started.")
            return redirect("maintenance-detail", pk=maintenance.pk)
    context = {"pool": pool, "form": form, "headroom": pool_headroom(pool)}
    return render(request, "pools/maintenance_new.html", context)


def _maintenance(pk: int) -> Maintenance:
    rows = MaintenanceNode.objects.select_related("node").order_by("wave", "node__name")
    return get_object_or_404(
        Maintenance.objects.select_related("pool", "started_by").prefetch_related(
            Prefetch("nodes", rows)
        ),
        pk=pk,
    )


@opens_in_its_cluster(Maintenance, "pool__cluster")
@require(Capability.VIEW)
def maintenance_detail(request: HttpRequest, pk: int) -> HttpResponse:
    maintenance = _maintenance(pk)
    rows = list(maintenance.nodes.all())
    context = {
        "maintenance": maintenance,
        "rows": rows,
        "held": [r for r in rows if r.wave == maintenance.wave and r.state == "held"],
        "draining": any(r.state == "draining" for r in rows),
        "events": maintenance.events.order_by("-at", "-id")[:EVENTS_SHOWN],
        "can_maintain": waves.can_maintain(request.user),
        "active": maintenance.state in Maintenance.ACTIVE_STATES,
    }
    template = "pools/_maintenance_live.html" if request.GET.get("partial") == "live" else None
    return render(request, template or "pools/maintenance_detail.html", context)


@require_POST
@require(Capability.EDIT_POOLS)
def maintenance_steer(request: HttpRequest, pk: int, step: str) -> HttpResponse:
    """The operator's buttons: confirm (the wave named), pause, resume, cancel."""
    get_object_or_404(Maintenance, pk=pk)
    try:
        if step == "confirm":
            wave = int(request.POST.get("wave", "") or 0)
            waves.maintenance_confirm(pk, wave=wave, user=request.user)
            messages.success(request, f"Wave {wave} confirmed: it goes back into service.")
        elif step == "pause":
            waves.maintenance_pause(pk, user=request.user, reason=request.POST.get("reason", ""))
            messages.success(request, "Paused: nothing changes until it is resumed.")
        elif step == "resume":
            waves.maintenance_resume(pk, user=request.user, now=timezone.now())
            messages.success(request, "Resumed.")
        else:
            waves.maintenance_cancel(pk, user=request.user)
            messages.success(request, "Cancelling: the wave under way is uncordoned.")
    except ValueError:
        messages.error(request, "Wave: a number.")
    except Refused as exc:
        messages.error(request, exc.message)
    return redirect("maintenance-detail", pk=pk)
