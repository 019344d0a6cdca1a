"""A reclaim's request, the people's part, over the API and on the pages (no cluster: filing
and deciding write only the database; the eviction is tested against API servers in
tests/edges/reclaim/): one person files a due reclaim's prefilled request and another approves
it, steps out of turn are 409s that change nothing, bad input is a 400 naming the field, an
opt-out since the notice stops the approval, and who is told what."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from pools.common.events import reclaim_wanted
from pools.models import AuditEvent, GpuPod, Reclaim, ReclaimPolicy
from pools.reclaim import notifications
from tests.api.conftest import api
from tests.factories import demo_inventory, reclaim_row, running_gpu_pod
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
URL = "/api/v1/reclaims/"
POD = ("ml-serving", "embedder-0", "uid-embedder-0", "a100-infer-000")


@pytest.fixture(autouse=True)
def demo(settings):  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = ""
    demo_inventory()


def due(**fields: object) -> Reclaim:
    namespace, pod, uid, node = POD
    return reclaim_row("inference", namespace=namespace, pod=pod, uid=uid, node=node, **fields)


def post(client: Client, path: str, body: object) -> object:
    return client.post(path, body, content_type="application/json")


def test_one_files_the_prefilled_request_and_another_approves(
    token_for,  # type: ignore[no-untyped-def]
    django_capture_on_commit_callbacks,
    settings,
) -> None:
    reclaim = due()
    prefilled = reclaim.reason
    assert post(api(token_for("viewers")), f"{URL}{reclaim.pk}/request/", {}).status_code == 403
    rita = api(token_for("requesters", "rita"))
    filed = post(rita, f"{URL}{reclaim.pk}/request/", {})
    assert filed.status_code == 200, filed.content
    assert (filed.json()["state"], filed.json()["requested_by"]) == ("requested", "rita")
    assert filed.json()["reason"] == prefilled  # a blank reason keeps the evidence

    arno = api(token_for("approvers", "arno"))
    with django_capture_on_commit_callbacks() as queued:
        approved = post(arno, f"{URL}{reclaim.pk}/approve/", {"reason": "idle all week"})
    assert approved.status_code == 200, approved.content
    found = approved.json()
    assert (found["state"], found["decided_by"], found["decision_reason"]) == (
        "approved",
        "arno",
        "idle all week",
    )
    reclaim.refresh_from_db()
    assert reclaim.evict_deadline is not None and reclaim.decided_at is not None
    deadline = reclaim.evict_deadline - reclaim.decided_at
    assert deadline == timedelta(seconds=settings.RECLAIM_EVICT_DEADLINE_SECONDS)
    # The worker is asked to evict at once, after the commit.
    assert reclaim_wanted in [getattr(c, "signal", None) for c in queued]
    actions = sorted(AuditEvent.objects.filter(reclaim=reclaim).values_list("action", flat=True))
    assert actions == ["reclaim.approved", "reclaim.requested"]


def test_four_eyes(token_for) -> None:  # type: ignore[no-untyped-def]
    reclaim = due()
    paula = api(token_for("pool-admins", "paula"))
    assert post(paula, f"{URL}{reclaim.pk}/request/", {"reason": "idle"}).status_code == 200
    refused = post(paula, f"{URL}{reclaim.pk}/approve/", {})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "self_approval"
    assert Reclaim.objects.get(pk=reclaim.pk).state == Reclaim.State.REQUESTED
    assert not AuditEvent.objects.filter(action="reclaim.approved").exists()


@pytest.mark.parametrize(
    ("state", "step", "body"),
    [
        ("noticed", "request", {}),  # still in its grace
        ("due", "approve", {}),  # not filed
        ("approved", "reject", {"reason": "keep it"}),  # the eviction is under way
        ("evicted", "request", {}),
    ],
)
def test_a_step_out_of_turn_is_409_and_changes_nothing(
    token_for,  # type: ignore[no-untyped-def]
    state: str,
    step: str,
    body: dict[str, str],
) -> None:
    fields: dict[str, object] = {"state": state}
    if state == "evicted":
        fields["finished_at"] = timezone.now()
    reclaim = due(**fields)
    answer = post(api(token_for("pool-admins", "paula")), f"{URL}{reclaim.pk}/{step}/", body)
    assert answer.status_code == 409, answer.content
    error = answer.json()["error"]
    assert error["code"] == "state_conflict" and f"reclaim #{reclaim.pk}" in error["message"]
    assert Reclaim.objects.get(pk=reclaim.pk).state == state
    assert not AuditEvent.objects.filter(reclaim=reclaim).exists()


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("reject/", {}, "reason"),
        ("reject/", {"reason": "   "}, "reason"),
        ("reject/", {"reason": 7}, "reason"),
        ("request/", {"reason": "x" * 2001}, "reason"),
        ("approve/", {"reason": ["idle"]}, "reason"),
    ],
)
def test_bad_input_names_the_field(token_for, path: str, body: object, field: str) -> None:  # type: ignore[no-untyped-def]
    reclaim = due(state=Reclaim.State.REQUESTED, requested_by=user_in("requesters", "rita"))
    answer = post(api(token_for("approvers", "arno")), f"{URL}{reclaim.pk}/{path}", body)
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"]
    assert Reclaim.objects.get(pk=reclaim.pk).state == Reclaim.State.REQUESTED
    assert not AuditEvent.objects.filter(reclaim=reclaim).exists()


def test_malformed_json_and_bad_filters(token_for) -> None:  # type: ignore[no-untyped-def]
    reclaim = due()
    client = api(token_for("requesters", "rita"))
    broken = client.post(f"{URL}{reclaim.pk}/request/", "{", content_type="application/json")
    assert broken.status_code == 400
    assert Reclaim.objects.get(pk=reclaim.pk).state == Reclaim.State.DUE
    assert client.get(f"{URL}?state=gone").json()["error"]["fields"].keys() == {"state"}
    assert client.get(f"{URL}?open=maybe").json()["error"]["fields"].keys() == {"open"}
    assert client.get(f"{URL}{reclaim.pk + 1}/").status_code == 404


def test_the_list_filters_by_pool_state_and_openness(token_for) -> None:  # type: ignore[no-untyped-def]
    open_one = due()
    ended = due(
        pod_uid="uid-older",
        state=Reclaim.State.RECOVERED,
        finished_at=timezone.now(),
        outcome="it worked again before its eviction",
    )
    client = api(token_for("viewers"))

    def ids(query: str) -> list[int]:
        return [r["id"] for r in client.get(f"{URL}{query}").json()["results"]]

    assert sorted(ids("")) == sorted([open_one.pk, ended.pk])
    assert ids("?open=true") == [open_one.pk]
    assert ids("?state=recovered") == [ended.pk]
    assert ids("?pool=training") == []
    assert client.get(f"{URL}{ended.pk}/").json()["outcome"].startswith("it worked again")


def test_an_opt_out_since_the_notice_stops_the_approval(token_for) -> None:  # type: ignore[no-untyped-def]
    namespace, pod, uid, node = POD
    running_gpu_pod(
        "inference", uid=uid, namespace=namespace, name=pod, node=node, reclaim_opt_out=True
    )
    reclaim = due(state=Reclaim.State.REQUESTED, requested_by=user_in("requesters", "rita"))
    answer = post(api(token_for("approvers", "arno")), f"{URL}{reclaim.pk}/approve/", {})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "opted_out"
    assert Reclaim.objects.get(pk=reclaim.pk).state == Reclaim.State.REQUESTED


def test_rejecting_keeps_the_pod_and_the_reclaim_followed(token_for) -> None:  # type: ignore[no-untyped-def]
    reclaim = due()
    answer = post(
        api(token_for("approvers", "arno")),
        f"{URL}{reclaim.pk}/reject/",
        {"reason": "the nightly index build"},
    )
    assert answer.status_code == 200, answer.content
    reclaim.refresh_from_db()
    assert reclaim.state == Reclaim.State.REJECTED and reclaim.finished_at is None
    # Still open: the sweep notices it again only once it has worked and idled again.
    event = AuditEvent.objects.get(reclaim=reclaim)
    assert (event.action, event.message) == ("reclaim.rejected", "the nightly index build")


def _page(role: str, name: str) -> Client:
    client = Client()
    client.force_login(user_in(role, name))
    return client


def test_the_pages_offer_each_role_its_step(token_for) -> None:  # type: ignore[no-untyped-def]
    reclaim = due()
    path = f"/reclaims/{reclaim.pk}/"
    viewer = _page("viewers", "vera").get(path).content.decode()
    assert 'data-action="request"' not in viewer and "search-oncall@example.com" in viewer
    rita = _page("requesters", "rita")
    assert 'data-action="request"' in rita.get(path).content.decode()
    assert rita.post(f"{path}request/", {"reason": ""}).status_code == 302
    assert Reclaim.objects.get(pk=reclaim.pk).state == Reclaim.State.REQUESTED
    assert 'data-action="approve"' not in rita.get(path).content.decode()
    arno = _page("approvers", "arno")
    assert 'data-action="approve"' in arno.get(path).content.decode()
    arno.post(f"{path}approve/", {"reason": ""})
    assert Reclaim.objects.get(pk=reclaim.pk).state == Reclaim.State.APPROVED
    # A step refused on the page says why and changes nothing.
    again = arno.post(f"{path}approve/", {"reason": ""}, follow=True).content.decode()
    assert "Cannot approve" in again
    listed = _page("viewers", "vera").get("/pools/inference/reclaim/").content.decode()
    assert f'data-reclaim-row="{reclaim.pk}"' in listed


def test_who_is_told_what(settings) -> None:  # type: ignore[no-untyped-def]
    settings.NOTIFY_EMAIL = True
    rita = user_in("requesters", "rita")
    arno = user_in("approvers", "arno")
    for user, address in ((rita, "rita@example.com"), (arno, "arno@example.com")):
        user.email = address
        user.save()
    reclaim = due(state=Reclaim.State.NOTICED, grace_until=timezone.now() + timedelta(hours=4))
    assert notifications.recipients("noticed", reclaim) == ["search-oncall@example.com"]
    # Due: those who may file it; filed: those who may approve it, not its filer.
    assert notifications.recipients("due", reclaim) == ["rita@example.com"]
    Reclaim.objects.filter(pk=reclaim.pk).update(requested_by=rita)
    reclaim.refresh_from_db()
    assert notifications.recipients("requested", reclaim) == ["arno@example.com"]
    notifications.reclaim_email(event="noticed", reclaim_id=reclaim.pk)
    (sent,) = mail.outbox
    assert sent.to == ["search-oncall@example.com"]
    assert f"{reclaim.grace_until:%Y-%m-%d %H:%M} UTC" in sent.body
    assert "gpu-portal.io/reclaim=never" in sent.body and f"/reclaims/{reclaim.pk}/" in sent.body

    Reclaim.objects.filter(pk=reclaim.pk).update(
        state=Reclaim.State.EVICTED, decided_by=arno, outcome="evicted"
    )
    reclaim.refresh_from_db()
    assert notifications.recipients("ended", reclaim) == [
        "arno@example.com",
        "rita@example.com",
        "search-oncall@example.com",
    ]
    # A chat handle is no address: the webhook carries it for a bridge to route.
    Reclaim.objects.filter(pk=reclaim.pk).update(contact="@search-oncall")
    reclaim.refresh_from_db()
    assert notifications.recipients("noticed", reclaim) == []


def test_a_step_answers_the_reclaim_whatever_the_query_string(token_for) -> None:  # type: ignore[no-untyped-def]
    reclaim = due(state=Reclaim.State.REQUESTED, requested_by=user_in("requesters", "rita"))
    arno = api(token_for("approvers", "arno"))
    answer = post(arno, f"{URL}{reclaim.pk}/approve/?state=requested", {})
    assert answer.status_code == 200 and answer.json()["state"] == "approved"


def test_a_pod_that_moved_pools_or_a_policy_turned_off_cannot_be_approved(token_for) -> None:  # type: ignore[no-untyped-def]
    namespace, pod, uid, node = POD
    running_gpu_pod("training", uid=uid, namespace=namespace, name=pod, node=node)
    reclaim = due(state=Reclaim.State.REQUESTED, requested_by=user_in("requesters", "rita"))
    arno = api(token_for("approvers", "arno"))
    moved = post(arno, f"{URL}{reclaim.pk}/approve/", {})
    assert moved.status_code == 409 and moved.json()["error"]["code"] == "not_reclaimable"
    assert "now runs in the pool training" in moved.json()["error"]["message"]
    GpuPod.objects.filter(uid=uid).update(pool_label="inference")
    ReclaimPolicy.objects.filter(pool__name="inference").update(enabled=False)
    off = post(arno, f"{URL}{reclaim.pk}/approve/", {})
    assert off.status_code == 409 and "no reclaim policy on" in off.json()["error"]["message"]
    assert Reclaim.objects.get(pk=reclaim.pk).state == Reclaim.State.REQUESTED


def test_only_pool_admins_set_the_policy_on_the_page() -> None:
    viewer = _page("approvers", "arno")
    sent = {"enabled": "on", "below_percent": "5", "for_hours": "4", "grace_hours": "0"}
    assert viewer.post("/pools/inference/reclaim/", sent).status_code == 403
    assert not ReclaimPolicy.objects.filter(pool__name="inference").exists()
