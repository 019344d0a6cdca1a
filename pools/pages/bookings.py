"""The booking pages: every booking, the form to book nodes ahead, one booking with its
approvals, conflicts and buttons, and a pool's calendar (weeks or a month, bookings and loans
as bars) with its iCalendar feed. Thin: they call pools.bookings."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from pools import bookings
from pools.bookings.calendar import (
    calendar_feed_create,
    calendar_feed_pool,
    calendar_feeds_revoke,
    calendar_ics,
    pool_calendar,
)
from pools.common.errors import InvalidInput, Refused
from pools.common.roles import Capability, has_capability, require
from pools.models import FREE_TEXT_MAX_LENGTH, Booking, Pool
from pools.pages.cluster_links import opens_in_its_cluster

WEEKS_SHOWN = 2
ICS_PAST = timedelta(days=30)
ICS_AHEAD = timedelta(days=366)


class BookingForm(forms.Form):
    # The pools are set per form: a queryset made at import keeps that moment's cluster.
    source = forms.ModelChoiceField(Pool.objects.none(), to_field_name="name", label="From pool")
    destination = forms.ModelChoiceField(
        Pool.objects.none(), to_field_name="name", label="Lent to pool"
    )
    team = forms.CharField(max_length=63, required=False)
    nodes = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Node names, separated by spaces or commas; or a number of GPUs below.",
    )
    gpus = forms.IntegerField(min_value=0, required=False, label="Or: GPUs")
    gpu_model = forms.CharField(max_length=100, required=False, label="of the model")
    starts_at = forms.DateTimeField(
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}), label="From (UTC)"
    )
    ends_at = forms.DateTimeField(
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}), label="Until (UTC)"
    )
    reason = forms.CharField(
        max_length=FREE_TEXT_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("source", "destination"):
            self.fields[name].queryset = Pool.objects.active()  # type: ignore[attr-defined]

    def clean_starts_at(self) -> datetime:
        return self.cleaned_data["starts_at"].replace(tzinfo=UTC)

    def clean_ends_at(self) -> datetime:
        return self.cleaned_data["ends_at"].replace(tzinfo=UTC)


@require(Capability.VIEW)
def booking_list(request: HttpRequest) -> HttpResponse:
    found = Booking.objects.select_related("source", "destination", "requested_by").order_by(
        "-created_at"
    )[:200]
    context = {
        "bookings": found,
        "can_book": has_capability(request.user, Capability.REQUEST_MOVE),
        "pools": Pool.objects.active().order_by("name"),
    }
    return render(request, "pools/booking_list.html", context)


@require(Capability.REQUEST_MOVE)
def booking_new(request: HttpRequest) -> HttpResponse:
    initial = {"source": request.GET.get("pool", "")}
    form = BookingForm(request.POST or None, initial=initial)
    conflicts = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            booking = bookings.booking_ask(
                user=request.user,
                source=data["source"],
                destination=data["destination"],
                team=data["team"],
                node_names=data["nodes"].replace(",", " ").split(),
                gpus=data["gpus"] or 0,
                gpu_model=data["gpu_model"],
                starts_at=data["starts_at"],
                ends_at=data["ends_at"],
                reason=data["reason"],
                now=timezone.now(),
            )
        except InvalidInput as exc:
            for field, message in exc.fields.items():
                form.add_error(field if field in form.fields else None, message)
        except bookings.BookingConflicts as exc:
            conflicts = exc.conflicts
        except Refused as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Booking #{booking.pk} asked for: it waits for approval.")
            return redirect("booking-detail", pk=booking.pk)
    return render(request, "pools/booking_new.html", {"form": form, "conflicts": conflicts})


@opens_in_its_cluster(Booking, "destination__cluster")
@require(Capability.VIEW)
def booking_detail(request: HttpRequest, pk: int) -> HttpResponse:
    booking = get_object_or_404(
        Booking.objects.select_related("source", "destination", "requested_by", "loan"), pk=pk
    )
    user = request.user
    own = booking.requested_by_id == user.pk
    context = {
        "booking": booking,
        "approvals": booking.approvals.select_related("approver"),
        "conflicts": bookings.booking_conflicts_of(booking)
        if booking.state == Booking.State.PENDING
        else [],
        "can_decide": booking.state == Booking.State.PENDING
        and not own
        and has_capability(user, Capability.APPROVE_MOVE),
        "can_cancel": booking.state in Booking.OPEN_STATES
        and (own or has_capability(user, Capability.EDIT_POOLS)),
        "events": booking.events.order_by("-at", "-id")[:100],
    }
    return render(request, "pools/booking_detail.html", context)


@require_POST
@require(Capability.VIEW)
def booking_decide(request: HttpRequest, pk: int, step: str) -> HttpResponse:
    get_object_or_404(Booking, pk=pk)
    reason, now, user = request.POST.get("reason", ""), timezone.now(), request.user
    try:
        if step == "approve":
            bookings.booking_approve(pk, approver=user, reason=reason, now=now)
        elif step == "reject":
            bookings.booking_reject(pk, approver=user, reason=reason, now=now)
        else:
            bookings.booking_cancel(pk, user=user, reason=reason, now=now)
    except Refused as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Booking #{pk}: {step} done.")
    return redirect("booking-detail", pk=pk)


def _range(view: str, start: str) -> tuple[date, date]:
    try:
        day = date.fromisoformat(start) if start else timezone.now().date()
    except ValueError:
        raise Http404("from: a date, YYYY-MM-DD") from None
    if view == "month":
        first = day.replace(day=1)
        following = (first + timedelta(days=32)).replace(day=1)
        return first, following
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(weeks=WEEKS_SHOWN)


def _placed(bars: list, since: datetime, until: datetime) -> list[dict[str, object]]:  # type: ignore[type-arg]
    """Each bar with its left edge and width in per cent of the range shown."""
    span = (until - since).total_seconds()
    placed = []
    for bar in bars:
        left = max((bar.start - since).total_seconds(), 0) / span
        right = min((bar.end - since).total_seconds(), span) / span
        placed.append(
            {
                "bar": bar,
                "left": round(left * 100, 2),
                "width": round(max(right - left, 0.01) * 100, 2),
            }
        )
    return placed


@require(Capability.VIEW)
def pool_calendar_page(request: HttpRequest, name: str) -> HttpResponse:
    pool = get_object_or_404(Pool.objects.active(), name=name)
    view = "month" if request.GET.get("view") == "month" else "weeks"
    first, end = _range(view, request.GET.get("from", ""))
    since = datetime.combine(first, time(), tzinfo=UTC)
    until = datetime.combine(end, time(), tzinfo=UTC)
    new_key = None
    if request.method == "POST":
        now = timezone.now()
        calendar_feeds_revoke(user=request.user, pool=pool, now=now)
        if request.POST.get("feed") == "new":
            new_key = calendar_feed_create(user=request.user, pool=pool)
        else:
            messages.success(request, "Your feed keys of this pool are revoked.")
    days = [first + timedelta(days=i) for i in range((end - first).days)]
    step = timedelta(weeks=WEEKS_SHOWN) if view == "weeks" else timedelta(days=31)
    context = {
        "pool": pool,
        "view": view,
        "days": days,
        "first": first,
        "earlier": (first - step).isoformat()
        if view == "weeks"
        else (first - timedelta(days=1)).replace(day=1).isoformat(),
        "later": end.isoformat(),
        "bars": _placed(pool_calendar(pool, since=since, until=until), since, until),
        "today": timezone.now().date(),
        "new_key": new_key,
        "feed_url": request.build_absolute_uri(f"/pools/{pool.name}/calendar.ics"),
    }
    return render(request, "pools/calendar.html", context)


@login_not_required
def pool_calendar_ics(request: HttpRequest, name: str) -> HttpResponse:
    """The pool's iCalendar feed, for a calendar application: the key in the URL is its
    login (a feed key of this pool, made on the calendar page); no key, no feed."""
    pool = Pool.objects.active().filter(name=name).first()
    # The same refusal whether the pool exists or not: without a key, no pool name is told.
    if pool is None or not calendar_feed_pool(request.GET.get("key", ""), pool):
        return HttpResponse(
            "A valid feed key of this pool is needed.\n", status=403, content_type="text/plain"
        )
    now = timezone.now()
    bars = pool_calendar(pool, since=now - ICS_PAST, until=now + ICS_AHEAD)
    body = calendar_ics(pool, bars, base_url=f"{request.scheme}://{request.get_host()}")
    response = HttpResponse(body, content_type="text/calendar; charset=utf-8")
    response["Cache-Control"] = "private, max-age=300"
    return response
