"""Each HTTP request's id, time and log line.

`RequestObservationMiddleware` comes first: it takes the caller's `X-Request-ID` (a load
balancer's, or a script's) or makes one, returns it on the response, keeps it in the log
context for every line the request writes (until the response is closed), and at the end
records the request's time by view and logs one line for it. `UserLogContextMiddleware`
comes after the login check and adds the user.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.core.signals import request_finished
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.utils.functional import empty

from pools.common import guarded_cache, log_context, observability
from pools.core.redact import redact_url
from pools.metrics import source
from portal.slow_requests import slow_request_watch

log = logging.getLogger("portal.request")
# What a caller's id may look like: a UUID, a trace id, a load balancer's token. Anything
# else (too long, spaces, control characters) is replaced, so a log line stays one line.
REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")
# Probes and scrapes, every few seconds: their lines only at DEBUG.
QUIET_VIEWS = frozenset({"healthz", "readyz", "metrics"})
# Views whose `pk` is a move's id.
MOVE_VIEWS = frozenset({"move-detail", "move-approve", "move-reject", "move-cancel", "loan-change"})

Handler = Callable[[HttpRequest], HttpResponse]


def request_id_from(header: str | None) -> str:
    if header and REQUEST_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


def view_label(request: HttpRequest) -> str:
    """The route's name, for the latency figures: bounded, unlike the path. The API's names
    have no namespace of their own and repeat the pages' (move-detail), so they carry
    `api:`; a path that matched no route is `unmatched`."""
    match = request.resolver_match
    if match is None:
        return "unmatched"
    name = match.view_name or match.route or "unnamed"
    if request.path_info.startswith("/api/") and ":" not in name:
        return f"api:{name}"
    return name


def loaded_user_name(request: HttpRequest) -> str | None:
    """The user's name if something already loaded the user: looking it up here would cost
    a query the view did not need (probes, token calls before the API authenticates)."""
    user = getattr(request, "user", None)
    if user is None or getattr(user, "_wrapped", None) is empty:
        return None
    return user.get_username() if user.is_authenticated else None


class RequestObservationMiddleware:
    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_from(request.headers.get("X-Request-ID"))
        started = time.perf_counter()
        # Not a scope that ends here: Django logs a 4xx or 5xx (django.request) after the
        # middleware has answered. The context ends with the response (request_finished).
        log_context.clear()
        log_context.bind(request_id=request_id)
        watch = slow_request_watch(settings.SLOW_REQUEST_STACK_SECONDS)
        if watch is None:
            response = self.get_response(request)
        else:
            with watch.running(redact_url(request.path), request_id):
                response = self.get_response(request)
        seconds = time.perf_counter() - started
        if user := loaded_user_name(request):  # a token call's user, known only now
            log_context.bind(user=user)
        self._record(request, response, seconds)
        response["X-Request-ID"] = request_id
        return response

    @staticmethod
    def _record(request: HttpRequest, response: HttpResponse, seconds: float) -> None:
        view = view_label(request)
        method = request.method or "GET"
        observability.request_observe(
            view=view, method=method, status=response.status_code, seconds=seconds
        )
        path = redact_url(request.path)  # the query string is never logged
        log.log(
            logging.DEBUG if view in QUIET_VIEWS else logging.INFO,
            "%s %s %s %.0fms",
            method,
            path,
            response.status_code,
            seconds * 1000,
            extra={
                "method": method,
                "path": path,
                "status": response.status_code,
                "view": view,
                "duration_ms": round(seconds * 1000, 1),
            },
        )


@receiver(request_finished)
def _log_context_end(**_: object) -> None:
    log_context.clear()


class UserLogContextMiddleware:
    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: object, args: object, kwargs: dict[str, object]
    ) -> None:
        match = request.resolver_match
        move_id = kwargs.get("pk") if match and match.url_name in MOVE_VIEWS else None
        log_context.bind(user=loaded_user_name(request), move_id=move_id)


class OutsideSystemsMiddleware:
    """Per request: one wait for Prometheus in total (pools.metrics.source.one_wait), and a
    record of what could not be reached (pools.common.guarded_cache), said on the response in
    `X-Portal-Degraded` (the pages show it too)."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with guarded_cache.request_scope(), source.one_wait():
            response = self.get_response(request)
            if parts := guarded_cache.degraded():
                response["X-Portal-Degraded"] = ", ".join(sorted(parts))
        return response
