"""The drills page of a pool: past drills with their checks, and (pool admins) a form to
start one (a node down, a GPU fault, a new node joining) for a defined time. Thin: it calls
pools.drills."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from pools import drills
from pools.common.errors import Refused
from pools.common.roles import Capability, require
from pools.core.drills import MAX_HOLD_SECONDS
from pools.models import Drill, Node, Pool


@require(Capability.VIEW)
def pool_drills(request: HttpRequest, name: str) -> HttpResponse:
    pool = get_object_or_404(Pool.objects.active(), name=name)
    can_run = drills.can_run_drills(request.user)
    if request.method == "POST":
        if not can_run:
            messages.error(request, "Only pool admins run drills.")
            return redirect("pool-drills", name=name)
        try:
            hold = int(request.POST.get("hold_seconds", "") or 0)
            kind = request.POST.get("kind", Drill.Kind.NODE_DOWN)
            drill = drills.drill_start(
                pool=pool,
                kind=kind,
                # The new-node drill adds its own node: the form's node list is for the others.
                node_name=""
                if kind in (Drill.Kind.NODE_JOINS, Drill.Kind.NO_ROOM, Drill.Kind.JOB_TIMEOUT)
                else request.POST.get("node", ""),
                hold_seconds=hold,
                user=request.user,
                now=timezone.now(),
            )
        except ValueError:
            messages.error(request, "Hold: a number of seconds.")
        except Refused as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request, f"Drill #{drill.pk} started: it ends by {drill.ends_at:%H:%M:%S} UTC."
            )
        return redirect("pool-drills", name=name)
    context = {
        "pool": pool,
        "drills": Drill.objects.filter(pool=pool).select_related("started_by")[:50],
        "can_run": can_run,
        "nodes": Node.objects.present()
        .filter(pool=pool, ready=True, cordoned=False)
        .values_list("name", flat=True),
        "kinds": Drill.Kind.choices,
        "min_hold": drills.MIN_HOLD_SECONDS,
        "max_hold": MAX_HOLD_SECONDS,
    }
    return render(request, "pools/drills.html", context)
