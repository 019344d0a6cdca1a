"""A page of a row kept in another cluster than the one the reader is in (a move's number in a
message, a link copied from a colleague in another cluster): opened there, not a 404."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from pools.common.cluster_access import current_cluster, served_clusters

View = Callable[..., HttpResponse]


def opens_in_its_cluster(model: type[models.Model], cluster_path: str) -> Callable[[View], View]:
    """Wrap a detail view taking `pk`: when the current cluster has no such row but another
    served cluster does, redirect to the same page in that cluster. The lookup is made only
    after a 404, so a page found at once costs no query more."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, pk: int, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, pk, *args, **kwargs)
            except Http404:
                found = model._default_manager.filter(pk=pk)  # every cluster's
                other = found.values_list(cluster_path, flat=True).first()
                if other is None or other == current_cluster() or other not in served_clusters():
                    raise
                query = request.GET.copy()
                query["cluster"] = other
                return redirect(f"{request.path}?{query.urlencode()}")

        return wrapped

    return decorator
