"""Which cluster a request is about: `?cluster=<name>` on any page or API call; without it,
the cluster last named on a page in this session (the pages' links then stay in it, and the
header says which it is); else the portal's own cluster.

The whole request, and a streamed response's body after it, runs inside that cluster's scope
(pools.core.cluster_scope), so every lookup of a pool or node by name finds that cluster's.
A name the portal does not serve is refused (404, the API's envelope on /api/), rather than
answered with an empty list that would read as "no nodes there". Views over the whole fleet
(the audit log, whose events keep the cluster they were recorded in, even one the portal no
longer serves) say so with `@any_cluster` (pools.core.cluster_scope): for them `?cluster=` is
a filter of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

from pools.api.errors import error_body
from pools.core.cluster_scope import cluster_scope, reads_any_cluster
from pools.models import current_cluster, served_clusters

Handler = Callable[[HttpRequest], HttpResponseBase]


def _reads_any_cluster(view: Callable[..., Any]) -> bool:
    cls = getattr(view, "cls", None) or getattr(view, "view_class", None)
    return reads_any_cluster(view) or (cls is not None and reads_any_cluster(cls))


def unknown_cluster(request: HttpRequest, name: str) -> HttpResponse:
    # The served names are not listed: a caller not logged in may be asking.
    message = f"No cluster named {name!r} is served here."
    if request.path_info.startswith("/api/"):
        body = error_body("unknown_cluster", message, {"cluster": message})
        return JsonResponse(body, status=404)
    return HttpResponse(message, status=404, content_type="text/plain; charset=utf-8")


def _scoped(content: Iterable[bytes], name: str) -> Iterator[bytes]:
    with cluster_scope(name):
        yield from content


SESSION_KEY = "cluster"


def _remembered(request: HttpRequest) -> str | None:
    """The cluster last named on a page of this session, while it is still served (one
    dropped from CLUSTERS_FILE is forgotten, not a 404 on every page)."""
    session = getattr(request, "session", None)
    name = session.get(SESSION_KEY) if session is not None else None
    return name if name in served_clusters() else None


def _remember(request: HttpRequest, name: str) -> None:
    # Pages only: an API call names its cluster each time, and a token client has no session.
    # A caller not signed in (Prometheus scraping /metrics/pools?cluster=) gets none either:
    # remembering would write a session row for every scrape.
    session = getattr(request, "session", None)
    user = getattr(request, "user", None)
    if session is None or request.path_info.startswith("/api/"):
        return
    if user is None or not user.is_authenticated:
        return
    if "cluster" in request.GET and session.get(SESSION_KEY) != name:
        session[SESSION_KEY] = name


class ClusterScopeMiddleware:
    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        name = request.GET.get("cluster") or _remembered(request) or current_cluster()
        if name not in served_clusters():
            request.unserved_cluster = name  # type: ignore[attr-defined]
            return self.get_response(request)  # refused by process_view, unless fleet-wide
        _remember(request, name)
        with cluster_scope(name):
            response = self.get_response(request)
        if response.streaming:
            # A CSV export's rows are read while the body is sent, after this returns.
            response.streaming_content = _scoped(response.streaming_content, name)  # type: ignore[attr-defined]
        return response

    def process_view(
        self,
        request: HttpRequest,
        view: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> HttpResponseBase | None:
        name = getattr(request, "unserved_cluster", None)
        if name is None or _reads_any_cluster(view):
            return None
        return unknown_cluster(request, name)
