"""Bookings over the API and on the pages, without a cluster (asking and deciding write only
the database; the start and the return are tested with a worker in tests/edges/bookings/):
bad input named by field with nothing written, conflicts named with what they overlap and
the moment, four eyes, the conflicts checked again at the approval, cancelling, the pool's
calendar and its iCalendar feed behind its key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from icalendar import Calendar

from pools.models import AuditEvent, Booking, Pool
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
URL = "/api/v1/bookings/"
TOMORROW = (timezone.now() + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)


@pytest.fixture(autouse=True)
def demo(settings):  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = ""
    demo_inventory()


def body(**changes: Any) -> dict[str, Any]:
    sent: dict[str, Any] = {
        "source": "mixed",
        "destination": "training",
        "team": "vision",
        "nodes": ["a100-reserve-000", "a100-reserve-001"],
        "starts_at": TOMORROW.isoformat(),
        "ends_at": (TOMORROW + timedelta(days=2)).isoformat(),
        "reason": "evaluation run",
    }
    sent.update(changes)
    return sent


def ask(client: Client, **changes: Any) -> Any:
    return client.post(URL, body(**changes), content_type="application/json")


def test_a_booking_asked_for_waits_for_someone_elses_approval(token_for) -> None:  # type: ignore[no-untyped-def]
    rita = api(token_for("requesters", "rita"))
    answer = ask(rita)
    assert answer.status_code == 201, answer.content
    booking = answer.json()
    assert (booking["state"], booking["requested_by"], booking["approvals_required"]) == (
        "pending",
        "rita",
        1,
    )
    assert (
        api(token_for("viewers"))
        .post(f"{URL}{booking['id']}/approve/", {}, "application/json")
        .status_code
        == 403
    )
    arno = api(token_for("approvers", "arno"))
    approved = arno.post(f"{URL}{booking['id']}/approve/", {"reason": "ok"}, "application/json")
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    actions = list(
        AuditEvent.objects.filter(booking_id=booking["id"]).values_list("action", flat=True)
    )
    assert sorted(actions) == ["booking.approved", "booking.requested"]


def test_four_eyes(token_for) -> None:  # type: ignore[no-untyped-def]
    # A pool admin may both ask and approve, but not their own booking.
    paula = api(token_for("pool-admins", "paula"))
    booking = ask(paula).json()
    refused = paula.post(f"{URL}{booking['id']}/approve/", {}, "application/json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "self_approval"
    assert Booking.objects.get().state == "pending"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"ends_at": (TOMORROW - timedelta(hours=1)).isoformat()}, "ends_at"),
        ({"starts_at": (TOMORROW - timedelta(days=3)).isoformat()}, "starts_at"),
        ({"nodes": ["a100-train-000"]}, "nodes"),
        ({"nodes": [], "gpus": 400, "gpu_model": "NVIDIA-A100-SXM4-80GB"}, "gpus"),
        ({"nodes": [], "gpus": 8, "gpu_model": "NVIDIA-L40S"}, "gpu_model"),
        ({"nodes": [], "gpus": "8", "gpu_model": "NVIDIA-A100-SXM4-80GB"}, "gpus"),
        ({"gpus": 8, "gpu_model": "NVIDIA-A100-SXM4-80GB"}, "nodes"),
        ({"destination": "mixed"}, "destination"),
        ({"destination": "nowhere"}, "destination"),
        ({"team": "not a label!"}, "team"),
        ({"reason": " "}, "reason"),
        ({"starts_at": "tomorrow"}, "starts_at"),
    ],
)
def test_bad_input_is_named_and_writes_nothing(
    token_for, changes: dict[str, Any], field: str
) -> None:  # type: ignore[no-untyped-def]
    answer = ask(api(token_for("requesters")), **changes)
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"], answer.json()
    assert not Booking.objects.exists() and not AuditEvent.objects.exists()


def test_a_conflict_names_the_booking_it_overlaps_and_the_moment(token_for) -> None:  # type: ignore[no-untyped-def]
    rita, arno = api(token_for("requesters", "rita")), api(token_for("approvers", "arno"))
    first = ask(rita).json()
    # A pending booking holds nothing: another may ask for the same nodes.
    second = ask(
        rita,
        starts_at=(TOMORROW + timedelta(days=1)).isoformat(),
        ends_at=(TOMORROW + timedelta(days=4)).isoformat(),
    ).json()
    assert arno.post(f"{URL}{first['id']}/approve/", {}, "application/json").status_code == 200
    # Once the first is approved, the second conflicts: at its approval, and if asked again.
    refused = arno.post(f"{URL}{second['id']}/approve/", {}, "application/json")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "booking_nodes"
    (conflict, *_) = refused.json()["error"]["fields"]["conflicts"]
    assert conflict["with"] == [f"booking #{first['id']}"]
    assert conflict["moment"] == (TOMORROW + timedelta(days=1)).isoformat()
    assert "a100-reserve-000, a100-reserve-001 is booked by booking #" in conflict["message"]
    assert Booking.objects.get(pk=second["id"]).state == "pending"
    again = ask(rita, starts_at=(TOMORROW + timedelta(hours=1)).isoformat())
    assert again.status_code == 409
    assert Booking.objects.count() == 2


def test_the_pools_floor_at_some_moment(token_for) -> None:  # type: ignore[no-untyped-def]
    Pool.objects.filter(name="mixed").update(min_nodes=8)
    answer = ask(
        api(token_for("requesters")),
        nodes=["a100-reserve-000", "a100-reserve-001", "a100-reserve-002"],
    )
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "booking_floor"
    assert "under its minimum of 8" in answer.json()["error"]["message"]


def test_cancel_before_the_start_frees_the_window(token_for) -> None:  # type: ignore[no-untyped-def]
    rita, arno = api(token_for("requesters", "rita")), api(token_for("approvers", "arno"))
    first = ask(rita).json()
    arno.post(f"{URL}{first['id']}/approve/", {}, "application/json")
    assert (
        api(token_for("requesters", "other"))
        .post(f"{URL}{first['id']}/cancel/", {}, "application/json")
        .status_code
        == 403
    )
    cancelled = rita.post(
        f"{URL}{first['id']}/cancel/", {"reason": "plans changed"}, "application/json"
    )
    assert cancelled.json()["state"] == "cancelled"
    assert ask(rita).status_code == 201  # the window is free again
    assert rita.post(f"{URL}{first['id']}/cancel/", {}, "application/json").status_code == 409


def test_a_count_of_gpus(token_for) -> None:  # type: ignore[no-untyped-def]
    answer = ask(api(token_for("requesters")), nodes=[], gpus=16, gpu_model="NVIDIA-A100-SXM4-80GB")
    assert answer.status_code == 201, answer.content
    assert answer.json()["gpus"] == 16 and answer.json()["nodes"] == []


def test_the_calendar_and_its_feed(token_for) -> None:  # type: ignore[no-untyped-def]
    rita = api(token_for("requesters", "rita"))
    booking = ask(rita).json()
    calendar = api(token_for("viewers")).get("/api/v1/pools/mixed/calendar/").json()
    (bar,) = calendar["bars"]
    assert (bar["kind"], bar["id"], bar["state"]) == ("booking", booking["id"], "pending")
    assert (
        api(token_for("viewers"))
        .get("/api/v1/pools/mixed/calendar/?since=2027-01-02T00:00:00Z&until=2027-01-01T00:00:00Z")
        .status_code
        == 400
    )

    vera = Client()
    vera.force_login(user_in("viewers", "vera"))
    page = vera.get("/pools/mixed/calendar/").content.decode()
    assert f'data-bar="booking-{booking["id"]}"' in page
    month = vera.get(f"/pools/mixed/calendar/?view=month&from={TOMORROW:%Y-%m-%d}").content.decode()
    assert f'data-bar="booking-{booking["id"]}"' in month
    assert vera.get("/pools/mixed/calendar/?from=someday").status_code == 404

    assert Client().get("/pools/mixed/calendar.ics").status_code == 403
    assert Client().get("/pools/no-such-pool/calendar.ics").status_code == 403
    assert Client().get("/pools/mixed/calendar.ics?key=gpc_wrong").status_code == 403
    made = vera.post("/pools/mixed/calendar/", {"feed": "new"}).content.decode()
    key = made.split("?key=")[1].split("<")[0]
    feed = Client().get(f"/pools/mixed/calendar.ics?key={key}")
    assert feed.status_code == 200 and feed["Content-Type"].startswith("text/calendar")
    (event,) = Calendar.from_ical(feed.content).walk("VEVENT")
    assert event["uid"] == f"booking-{booking['id']}@gpu-pools"
    assert event.decoded("dtstart") == datetime.fromisoformat(booking["starts_at"]).astimezone(UTC)
    assert Client().get(f"/pools/training/calendar.ics?key={key}").status_code == 403  # one pool
    vera.post("/pools/mixed/calendar/", {"feed": "revoke"})
    assert Client().get(f"/pools/mixed/calendar.ics?key={key}").status_code == 403


def test_the_pages(token_for) -> None:  # type: ignore[no-untyped-def]
    rita = Client()
    rita.force_login(user_in("requesters", "rita"))
    form = {
        "source": "mixed",
        "destination": "training",
        "team": "vision",
        "nodes": "a100-reserve-000, a100-reserve-001",
        "starts_at": f"{TOMORROW:%Y-%m-%dT%H:%M}",
        "ends_at": f"{TOMORROW + timedelta(days=1):%Y-%m-%dT%H:%M}",
        "reason": "evaluation run",
    }
    refused = rita.post(
        "/bookings/new/", {**form, "ends_at": f"{TOMORROW - timedelta(hours=2):%Y-%m-%dT%H:%M}"}
    )
    assert "The window ends before it starts." in refused.content.decode()
    made = rita.post("/bookings/new/", form)
    booking = Booking.objects.get()
    assert made.status_code == 302 and made["Location"] == f"/bookings/{booking.pk}/"
    page = rita.get(made["Location"]).content.decode()
    assert 'data-action="cancel"' in page and 'data-action="approve"' not in page
    arno = Client()
    arno.force_login(user_in("approvers", "arno"))
    assert 'data-action="approve"' in arno.get(made["Location"]).content.decode()
    arno.post(f"/bookings/{booking.pk}/approve/", {"reason": ""})
    assert Booking.objects.get().state == "approved"
    listed = arno.get("/bookings/").content.decode()
    assert f'data-booking="{booking.pk}"' in listed
    conflicting = rita.post("/bookings/new/", form).content.decode()
    assert 'data-conflict="nodes"' in conflicting
    vera = Client()
    vera.force_login(user_in("viewers", "vera"))
    assert vera.get("/bookings/new/").status_code == 403
