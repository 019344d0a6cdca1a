"""The fleet page: every cluster served, with its pools and GPU totals by model."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from pools.common.roles import Capability, require
from pools.core.cluster_scope import any_cluster
from pools.fleet.across import fleet_summary


@any_cluster
@require(Capability.VIEW)
def fleet(request: HttpRequest) -> HttpResponse:
    return render(request, "pools/fleet.html", {"fleet": fleet_summary()})
