"""The move pages: ask with a preview, decide in the inbox, follow the request, read the log."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.models import MoveRequest, Node, Pool
from tests.factories import demo_inventory
from tests.moves_helpers import user_in


def client_for(role: str, name: str | None = None) -> Client:
    client = Client()
    client.force_login(user_in(role, name))
    return client


@pytest.fixture
def inventory(db) -> dict[str, Node]:  # type: ignore[no-untyped-def]
    """The demo scenario's GPU nodes, as the inventory stores them (no cluster needed)."""
    return demo_inventory()


FORM = {
    "nodes": "a100-reserve-000,a100-reserve-001",
    "destination": "training",
    "reason": "more training capacity",
    "drain_policy": "leave-running",
    "drain_deadline_minutes": "30",
}


@pytest.mark.django_db
def test_preview_then_ask(inventory: dict[str, Node]) -> None:
    rita = client_for("requesters", "rita")
    preview = rita.post("/moves/new/", {**FORM, "preview": "1"}).content.decode()
    assert "All checks pass." in preview
    row = re.search(r'<tr data-node="a100-reserve-000">(.*?)</tr>', preview, re.S).group(1)  # type: ignore[union-attr]
    assert "~ gpu-pool: mixed → training" in row
    assert "+ taint workload-training=true:NoSchedule" in row
    assert 'class="gpu-pod">research/notebook-a100-reserve-000 — 1 GPU' in row
    assert not MoveRequest.objects.exists()
    response = rita.post("/moves/new/", {**FORM, "submit": "1"})
    move = MoveRequest.objects.get()
    assert response["Location"] == f"/moves/{move.pk}/"
    assert move.items.count() == 2 and move.requested_by.username == "rita"


@pytest.mark.django_db
def test_failed_checks_show_and_offer_no_submit(inventory: dict[str, Node]) -> None:
    rita = client_for("requesters", "rita")
    form = {
        **FORM,
        "nodes": "a100-train-000,a100-train-001,a100-train-002,a100-train-003",
        "destination": "mixed",
    }
    html = rita.post("/moves/new/", {**form, "preview": "1"}).content.decode()
    assert 'data-check="capacity_floor"' in html
    assert "Ask for approval" not in html
    html = rita.post("/moves/new/", {**form, "submit": "1"}).content.decode()
    assert "below its minimum of 2" in html and not MoveRequest.objects.exists()
    html = rita.post("/moves/new/", {**FORM, "reason": "", "submit": "1"}).content.decode()
    assert "A move needs a reason." in html and not MoveRequest.objects.exists()


@pytest.mark.django_db
def test_pool_page_offers_moves_and_reconcile_to_requesters(inventory: dict[str, Node]) -> None:
    html = client_for("requesters").get("/pools/training/").content.decode()
    assert 'name="node" value="a100-train-000" form="move-form"' in html
    assert "Reconcile all drifted nodes (1)" in html
    reconcile = client_for("requesters", "r2").get("/moves/new/?reconcile=1&pool=training")
    text = reconcile.content.decode()
    assert 'value="a100-train-drift-000"' in text and 'name="reconcile"' in text
    viewer_html = client_for("viewers").get("/pools/training/").content.decode()
    assert 'name="node"' not in viewer_html and "Move selected" not in viewer_html


@pytest.mark.django_db
def test_inbox_approve_reject_cancel_through_the_pages(inventory: dict[str, Node]) -> None:
    rita = client_for("requesters", "rita")
    rita.post("/moves/new/", {**FORM, "submit": "1"})
    move = MoveRequest.objects.get()
    arno = client_for("approvers", "arno")
    inbox = arno.get("/moves/").content.decode()
    assert re.search(rf'<tr data-move="{move.pk}">.*?<td>2</td>', inbox, re.S)  # two nodes
    assert '<span class="badge">1</span>' in inbox
    detail = arno.get(f"/moves/{move.pk}/").content.decode()
    assert "Approve" in detail and "Reject" in detail
    assert "Approve" not in rita.get(f"/moves/{move.pk}/").content.decode()  # four eyes
    response = arno.post(f"/moves/{move.pk}/reject/", {"reason": ""}, follow=True)
    assert "Say why the move is rejected." in response.content.decode()
    arno.post(f"/moves/{move.pk}/reject/", {"reason": "not this week"})
    move.refresh_from_db()
    assert move.state == "rejected"
    timeline = arno.get(f"/moves/{move.pk}/").content.decode()
    assert "move.rejected — not this week" in timeline
    assert rita.post(f"/moves/{move.pk}/approve/").status_code == 403


@pytest.mark.django_db
def test_self_approval_through_the_page_is_refused(inventory: dict[str, Node]) -> None:
    admin = client_for("pool-admins", "pat")
    admin.post("/moves/new/", {**FORM, "submit": "1"})
    move = MoveRequest.objects.get()
    response = admin.post(f"/moves/{move.pk}/approve/", follow=True)
    assert "Four eyes: you cannot approve your own request." in response.content.decode()
    move.refresh_from_db()
    assert move.state == "pending"


@pytest.mark.django_db
def test_loans_page_shows_the_countdown_and_needs_an_approver_to_change(
    inventory: dict[str, Node],
) -> None:
    now = timezone.now()
    loan = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=Pool.objects.get(name="shared"),
        reason="burst",
        now=now,
        loan_until=now + timedelta(hours=5),
    )
    html = client_for("viewers").get("/loans/").content.decode()
    assert f'data-loan="{loan.pk}"' in html and "4\xa0hours" in html
    assert "End now" not in html
    arno = client_for("approvers", "arno")
    arno.post(f"/loans/{loan.pk}/change/", {"reason": "done early", "end": "1"})
    loan.refresh_from_db()
    assert loan.loan_until <= timezone.now()


@pytest.mark.django_db
def test_audit_log_filters(inventory: dict[str, Node]) -> None:
    rita = client_for("requesters", "rita")
    rita.post("/moves/new/", {**FORM, "submit": "1"})
    move = MoveRequest.objects.get()
    viewer = client_for("viewers")
    html = viewer.get(f"/audit/?request={move.pk}").content.decode()
    assert html.count('data-event="move.requested"') == 1
    assert 'data-event="' in viewer.get("/audit/?actor=rita").content.decode()
    assert 'data-event="' not in viewer.get("/audit/?actor=nobody").content.decode()


@pytest.mark.django_db
def test_node_page_shows_its_move_history(inventory: dict[str, Node]) -> None:
    rita = client_for("requesters", "rita")
    rita.post("/moves/new/", {**FORM, "submit": "1"})
    html = client_for("viewers").get("/nodes/a100-reserve-000/").content.decode()
    move = MoveRequest.objects.get()
    assert f'href="/moves/{move.pk}/">#{move.pk}</a> Move' in html
    assert "more training capacity" in html


@pytest.mark.django_db
def test_reconcile_a_selection_and_see_it_on_the_node_page(inventory: dict[str, Node]) -> None:
    rita = client_for("requesters", "rita")
    html = rita.get("/pools/training/").content.decode()
    assert 'name="reconcile_in" value="training"' in html
    form = rita.get("/moves/new/?node=a100-train-drift-000&reconcile_in=training").content
    text = form.decode()
    assert 'value="a100-train-drift-000"' in text
    assert '<input type="hidden" name="destination" value="training"' in text
    assert 'name="reconcile" value="True"' in text or 'name="reconcile" value="true"' in text
    rita.post(
        "/moves/new/",
        {
            **FORM,
            "nodes": "a100-train-drift-000",
            "destination": "training",
            "reconcile": "True",
            "reason": "put the taint back",
            "submit": "1",
        },
    )
    move = MoveRequest.objects.get()
    assert move.kind == "reconcile"
    node_page = client_for("viewers").get("/nodes/a100-train-drift-000/").content.decode()
    assert "Recent audit events" in node_page and "put the taint back" in node_page


@pytest.mark.django_db
def test_a_normal_move_is_not_headed_reconcile_and_leaves_out_its_source(
    inventory: dict[str, Node],
) -> None:
    rita = client_for("requesters", "rita")
    # A preview posts the hidden reconcile input as the text "False".
    preview = rita.post("/moves/new/", {**FORM, "reconcile": "False", "preview": "1"})
    html = preview.content.decode()
    assert "<h1>Move nodes</h1>" in html and "Reconcile drifted nodes" not in html
    # Both nodes are in mixed: the destinations leave it out and nothing is chosen for you.
    form = rita.get("/moves/new/?node=a100-reserve-000&node=a100-reserve-001").content.decode()
    destinations = re.search(r'<select name="destination".*?</select>', form, re.S).group(0)  # type: ignore[union-attr]
    assert '<option value="mixed"' not in destinations
    assert '<option value="" selected>Choose a pool…</option>' in destinations
    assert '<option value="training">' in destinations


@pytest.mark.django_db
def test_move_form_with_nothing_ticked_lets_you_name_the_nodes(inventory: dict[str, Node]) -> None:
    rita = client_for("requesters", "rita")
    html = rita.get("/moves/new/").content.decode()
    assert re.search(r'<input type="text" name="nodes"[^>]*required', html)
    response = rita.post(
        "/moves/new/", {**FORM, "nodes": "a100-reserve-000, a100-reserve-001", "preview": "1"}
    )
    assert "All checks pass." in response.content.decode()


@pytest.mark.django_db
def test_reconcile_this_node_prefills_its_reason_and_asks_no_destination_or_loan(
    inventory: dict[str, Node],
) -> None:
    rita = client_for("requesters", "rita")
    node_page = rita.get("/nodes/a100-train-drift-000/").content.decode()
    link = re.search(r'href="(/moves/new/\?reconcile=1[^"]*)">Reconcile this node', node_page)
    assert link is not None
    html = rita.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert "<h1>Reconcile drifted nodes</h1>" in html
    assert "reconcile drifted node of training</textarea>" in html
    assert '<input type="hidden" name="destination" value="training"' in html
    assert 'name="loan_until"' not in html and '<select name="destination"' not in html


@pytest.mark.django_db
def test_the_approvals_badge_counts_only_what_you_may_approve(inventory: dict[str, Node]) -> None:
    pat = client_for("pool-admins", "pat")  # an admin may approve, but not their own request
    pat.post("/moves/new/", {**FORM, "submit": "1"})
    assert 'class="badge"' not in pat.get("/moves/").content.decode()
    arno = client_for("approvers", "arno")
    assert '<span class="badge">1</span>' in arno.get("/moves/").content.decode()


@pytest.mark.django_db
def test_loans_page_lists_nodes_sources_history_and_the_automatic_return(
    inventory: dict[str, Node],
) -> None:
    now = timezone.now()
    loan = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000", "a100-reserve-001"],
        destination=Pool.objects.get(name="shared"),
        reason="burst",
        now=now,
        loan_until=now + timedelta(hours=2),
    )
    viewer = client_for("viewers")
    active = viewer.get("/loans/").content.decode()
    row = re.search(rf'<tr data-loan="{loan.pk}">(.*?)</tr>', active, re.S).group(1)  # type: ignore[union-attr]
    assert "a100-reserve-000</a>" in row and "a100-reserve-001</a>" in row
    assert row.count(">mixed</span>") == 2 and ">shared</span>" in row  # from, and lent to
    assert "in 1\xa0hour" in row  # the countdown
    # The loan was carried out (as a worker would record it), then its time came.
    loan.items.update(state="done", active=False)
    MoveRequest.objects.filter(pk=loan.pk).update(state="succeeded")
    (back,) = moves.loans_return_due(now=now + timedelta(hours=2, seconds=1))
    ended = viewer.get("/loans/").content.decode()
    assert f'data-loan="{loan.pk}"' not in ended
    history = re.search(rf'<tr data-ended-loan="{loan.pk}">(.*?)</tr>', ended, re.S).group(1)  # type: ignore[union-attr]
    assert f'href="/moves/{back.pk}/" data-return-of="{loan.pk}">#{back.pk}</a>' in history
    detail = viewer.get(f"/moves/{loan.pk}/").content.decode()
    assert f'data-return-of="{loan.pk}">move #{back.pk}</a>' in detail
    listed = viewer.get("/moves/?state=all").content.decode()
    back_row = re.search(rf'<tr data-move="{back.pk}">(.*?)</tr>', listed, re.S).group(1)  # type: ignore[union-attr]
    assert f'Loan return <span class="small">of <a href="/moves/{loan.pk}/">' in back_row
    assert "automatic" in back_row and "0/0" not in back_row and "0 of 0" not in back_row


@pytest.mark.django_db
def test_states_read_as_words_in_the_move_list(inventory: dict[str, Node]) -> None:
    html = client_for("viewers").get("/moves/?state=all").content.decode()
    tabs = re.search(r'<nav class="tabs">(.*?)</nav>', html, re.S).group(1)  # type: ignore[union-attr]
    assert ">Partially failed</a>" in tabs and "partially_failed</a>" not in tabs
    assert ">Pending approval</a>" in tabs


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("until", "said"),
    [
        ("", "Say until when the loan is extended."),
        ("next tuesday", "Enter a valid date/time."),
    ],
)
def test_extend_without_a_valid_date_keeps_the_loan(
    inventory: dict[str, Node], until: str, said: str
) -> None:
    now = timezone.now()
    loan = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=Pool.objects.get(name="shared"),
        reason="burst",
        now=now,
        loan_until=now + timedelta(hours=5),
    )
    end = loan.loan_until
    arno = client_for("approvers", "arno")
    response = arno.post(
        f"/loans/{loan.pk}/change/",
        {"reason": "more time", "until": until, "extend": "1"},
        follow=True,
    )
    html = response.content.decode()
    assert said in html and "needs a reason" not in html
    loan.refresh_from_db()
    assert loan.loan_until == end and loan.loan_return_requested_at is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("policy", "said", "unsaid"),
    [
        ("drain-first", "its GPU pods evicted", "running pods finish where they are"),
        ("leave-running", "running pods finish where they are", "its GPU pods evicted"),
    ],
)
def test_the_preview_notes_only_the_drain_policy_chosen(
    inventory: dict[str, Node], policy: str, said: str, unsaid: str
) -> None:
    form = {**FORM, "drain_policy": policy, "preview": "1"}
    html = client_for("requesters", "rita").post("/moves/new/", form).content.decode()
    assert f'data-drain-note="{policy}"' in html
    assert said in html and unsaid not in html
