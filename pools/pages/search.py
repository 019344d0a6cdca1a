"""The search page: one box in every page's navigation, results grouped."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from pools.common.cluster_access import served_clusters
from pools.common.roles import Capability, clusters_where, require
from pools.core.search import MAX_QUERY_LENGTH, query_problem
from pools.search import search


@require(Capability.VIEW)
def search_page(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "").strip()
    if problem := query_problem(text):
        context = {"q": text[:MAX_QUERY_LENGTH].replace("\x00", ""), "error": problem}
        return render(request, "pools/search.html", context, status=400)
    found = search(text=text, clusters=clusters_where(request.user, Capability.VIEW))
    context = {"q": text, "results": found, "several": len(served_clusters()) > 1}
    return render(request, "pools/search.html", context)
