"""The search page: one box in every page's navigation, results grouped."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from pools.common.roles import Capability, require
from pools.core.search import MAX_QUERY_LENGTH, query_problem
from pools.search import search


@require(Capability.VIEW)
def search_page(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "").strip()
    if problem := query_problem(text):
        context = {"q": text[:MAX_QUERY_LENGTH].replace("\x00", ""), "error": problem}
        return render(request, "pools/search.html", context, status=400)
    return render(request, "pools/search.html", {"q": text, "results": search(text=text)})
