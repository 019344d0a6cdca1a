"""The insights pages: workload profiles, a pool's indicators and readiness, the advisor.
Thin: they parse the window, call pools.insights and render."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from pools.common.errors import Refused
from pools.common.roles import Capability, has_capability, require
from pools.core import charts
from pools.core.insights import advisor
from pools.core.insights.failures import CAUSE_SIGNS, CAUSE_TITLES, Cause, FailureReport
from pools.core.insights.profiles import GROUPINGS
from pools.core.insights.queueing import QUEUE_CAUSE_TITLES
from pools.core.insights.records import WINDOW_DAYS
from pools.core.insights.replacement import DIMENSION_TITLES
from pools.insights import dismissals, gather
from pools.models import Pool
from pools.pages.charts import chart_range


def _days(request: HttpRequest) -> int:
    days = gather.window_days(request.GET.get("days") or request.POST.get("days"))
    if days is None:
        raise Http404("The window is 7, 30 or 90 days.")
    return days


@require(Capability.VIEW)
def profiles(request: HttpRequest) -> HttpResponse:
    days = _days(request)
    by = request.GET.get("by", "namespace")
    if by not in GROUPINGS:
        raise Http404("Group by namespace or team.")
    found = gather.profiles(days=days, by=by, now=timezone.now())
    context = {
        "found": found,
        "cause_titles": {str(c): t for c, t in CAUSE_TITLES.items()},
        "days": days,
        "windows": WINDOW_DAYS,
        "by": by,
        "groupings": GROUPINGS,
    }
    return render(request, "pools/profiles.html", context)


@require(Capability.VIEW)
def pool_insights(request: HttpRequest, name: str) -> HttpResponse:
    pool = get_object_or_404(Pool.objects.active(), name=name)
    days = _days(request)
    now = timezone.now()
    found, checks = gather.pool_insights(pool, days=days, now=now)
    # The window chosen is the charts' range, unless a range is asked for.
    span, status = chart_range(request, ranges=charts.WINDOW_RANGES, default=f"{days}d")
    context = {
        "pool": pool,
        "days": days,
        "windows": WINDOW_DAYS,
        "span": span,
        "spans": list(charts.WINDOW_RANGES),
        **_history_charts(pool, span, now.timestamp()),
        "found": found,
        "checks": checks,
        "failure_classes": failure_classes(found.failures),
        "queue_titles": {str(c): t for c, t in QUEUE_CAUSE_TITLES.items()},
        "dimension_titles": DIMENSION_TITLES,
    }
    return render(request, "pools/pool_insights.html", context, status=status)


def failure_classes(report: FailureReport) -> list[dict[str, object]]:
    """Every class the classifier keeps apart, in its order, with its title, what puts a
    failure in it, its count and its latest examples: a class with none still says what
    would count."""
    return [
        {
            "key": str(c),
            "title": CAUSE_TITLES[c],
            "signs": CAUSE_SIGNS[c],
            "count": report.counts.get(c, 0),
            "examples": report.examples.get(c, []),
        }
        for c in Cause
    ]


def _history_charts(pool: Pool, span: str, now: float) -> dict[str, SafeString | str | None]:
    """The pool's utilisation and idle whole nodes over the chart range, drawn over the
    whole range (a history shorter than the range leaves its start empty)."""
    history = gather.pool_utilisation_history(pool, span)
    x_range = (now - charts.WINDOW_RANGES[span].total_seconds(), now)
    # charts.line_chart escapes every text it writes.
    average = charts.line_chart(
        history.average, title=f"Average GPU utilisation, {span}", x_range=x_range
    )
    idle = charts.line_chart(
        history.idle_nodes,
        title=f"Idle whole nodes, {span}",
        y_max=float(history.nodes) or None,
        unit="",
        x_range=x_range,
    )
    return {
        "average_chart": mark_safe(average),  # noqa: S308
        "idle_chart": mark_safe(idle),  # noqa: S308
        "history_error": history.error,
    }


def move_link(suggestion: advisor.MoveSuggestion) -> str:
    """The move form, prefilled with the suggested nodes, destination, reason and loan end:
    the request it makes still needs someone else's approval."""
    query = {
        "nodes": ",".join(suggestion.nodes),
        "destination": suggestion.destination,
        "reason": suggestion.reason(),
    }
    if suggestion.loan_days:
        query["loan_days"] = str(suggestion.loan_days)
    return f"{reverse('move-new')}?{urlencode(query)}"


@require(Capability.VIEW)
def advice_list(request: HttpRequest) -> HttpResponse:
    days = _days(request)
    found = gather.advice(days=days, now=timezone.now())
    context = {
        "days": days,
        "windows": WINDOW_DAYS,
        "advice": [(a, move_link(a.move) if a.move else None) for a in found],
        "can_act": has_capability(request.user, Capability.REQUEST_MOVE),
    }
    return render(request, "pools/advice.html", context)


@require(Capability.REQUEST_MOVE)
@require_POST
def advice_dismiss(request: HttpRequest) -> HttpResponse:
    days = _days(request)
    try:
        dismissals.advice_dismiss(
            key=request.POST.get("key", ""),
            reason=request.POST.get("reason", ""),
            user=request.user,
            days=days,
            now=timezone.now(),
        )
    except Refused as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Dismissed: it comes back if its evidence changes.")
    return redirect(f"{reverse('advice')}?days={days}")
