"""Pages of the move workflow: ask (with the dry-run preview), decide, follow, and loans."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from pools import moves
from pools.common.errors import MetricsUnavailable, Refused
from pools.common.filtering import page_queryset
from pools.common.roles import Capability, require
from pools.fleet import selectors
from pools.fleet.filters import NodeFilter
from pools.maintenance.headroom import DrainFit, drain_fits
from pools.models import FREE_TEXT_MAX_LENGTH, MoveItem, MoveRequest, Pool
from pools.moves import ACTION_CAPABILITY, Action
from pools.moves.filters import ACTIVE, ALL, MoveFilter
from pools.moves.impact import move_impact
from pools.moves.selectors import active_loans, ended_loans, moves_for_list
from pools.pages.cluster_links import opens_in_its_cluster


def _move_form_initial(request: HttpRequest) -> dict[str, object]:
    """What the links to the form prefill: ticked nodes, a reconcile of a selection, of a
    pool's drifted nodes, or of one node."""
    names = request.GET.getlist("node") or request.GET.get("nodes", "").split(",")
    initial: dict[str, object] = {
        "nodes": ",".join(n for n in names if n),
        "reconcile": request.GET.get("reconcile") == "1",
        "destination": request.GET.get("destination", ""),
        "reason": request.GET.get("reason", ""),
    }
    if request.GET.get("match_in"):  # "Move all that match" on a pool page: its filter
        initial["nodes"] = ",".join(_matching_nodes(request, request.GET["match_in"]))
    if (loan_days := request.GET.get("loan_days", "")).isdigit() and 0 < int(loan_days) <= 90:
        # The advisor's loans: the window starts when the request is made.
        initial["loan_until"] = (timezone.now() + timedelta(days=int(loan_days))).strftime(
            "%Y-%m-%dT%H:%M"
        )
    if request.GET.get("reconcile_in"):  # "Reconcile selected" on a pool page
        initial["reconcile"] = True
        initial["destination"] = request.GET["reconcile_in"]
    if initial["reconcile"] and request.GET.get("pool"):
        pool = get_object_or_404(Pool.objects.active(), name=request.GET["pool"])
        initial["nodes"] = ",".join(selectors.drifted_node_names(pool))
        initial["destination"] = pool.name
    if initial["reconcile"] and initial["destination"]:
        count = len([n for n in str(initial["nodes"]).split(",") if n])
        initial["reason"] = (
            f"reconcile drifted node{'s' if count != 1 else ''} of {initial['destination']}"
        )
    return initial


def _matching_nodes(request: HttpRequest, slug: str) -> list[str]:
    """The names of a pool's nodes that match the pool page's filter in the query."""
    pool = (
        None
        if slug == selectors.UNASSIGNED
        else get_object_or_404(Pool.objects.active(), name=slug)
    )
    try:
        nodes, _ = page_queryset(
            NodeFilter(request.GET, queryset=selectors.pool_nodes(pool)), request
        )
        return list(nodes.order_by("name").values_list("name", flat=True))
    except MetricsUnavailable as exc:  # a health filter without metrics: no guessed nodes
        messages.error(request, exc.message)
        return []


def _move_form(request: HttpRequest) -> MoveForm:
    data = request.POST if request.method == "POST" else None
    initial = {} if data is not None else _move_form_initial(request)
    names = str((data or initial).get("nodes", "")).split(",")
    source = selectors.single_source_pool([n.strip() for n in names if n.strip()])
    return MoveForm(data, initial=initial, source_pool=source)


@require(Capability.REQUEST_MOVE)
def move_new(request: HttpRequest) -> HttpResponse:
    form = _move_form(request)
    plan = impact = None
    drains: list[DrainFit] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        ask = moves.MoveAsk(
            node_names=data["nodes"],
            destination=data["destination"],
            reason=data["reason"] or "",
            drain_policy=data["drain_policy"],
            drain_deadline_seconds=data["drain_deadline_minutes"] * 60,
            loan_until=data.get("loan_until"),
            health_override=data["health_override"],
            reconcile=data["reconcile"],
        )
        plan = moves.move_plan(ask=ask, now=timezone.now())
        impact = move_impact(plan, drain_policy=data["drain_policy"])
        if data["drain_policy"] == MoveRequest.DrainPolicy.DRAIN_FIRST:
            drains = drain_fits(p.node for p in plan.nodes)
        if "submit" in request.POST:
            try:
                move = moves.move_request_ask(
                    requested_by=request.user, ask=ask, now=timezone.now()
                )
            except Refused as exc:
                for field, message in exc.fields.items():
                    if field in form.fields:
                        form.add_error(field, message)
                messages.error(request, exc.message)
            else:
                messages.success(request, f"Move #{move.pk} asked; it waits for approval.")
                return redirect("move-detail", pk=move.pk)
    return render(
        request,
        "pools/move_new.html",
        {"form": form, "plan": plan, "impact": impact, "drains": drains},
        status=400 if form.errors else 200,  # a refused form is the client's error
    )


@require(Capability.VIEW)
def move_list(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", MoveRequest.State.PENDING)
    query = request.GET.copy()
    query.setlist("state", [state])  # the same FilterSet as the export's and the API's
    found, status = page_queryset(
        MoveFilter(query, queryset=moves_for_list(), request=request), request
    )
    page = Paginator(found, 50).get_page(request.GET.get("page"))
    query.pop("page", None)
    return render(
        request,
        "pools/move_list.html",
        {
            "page": page,
            "state": state,
            "states": [ACTIVE, *MoveRequest.State.values, ALL],
            "export_query": query.urlencode(),
            "reason_max_length": FREE_TEXT_MAX_LENGTH,
        },
        status=status,
    )


# A running move's page refreshes at least this often: a move takes seconds, not minutes.
MOVE_LIVE_SECONDS = 2


@opens_in_its_cluster(MoveRequest, "destination__cluster")
@require(Capability.VIEW)
def move_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _move_detail_page(request, pk)


def _move_detail_page(
    request: HttpRequest, pk: int, *, decision_form: DecisionForm | None = None, status: int = 200
) -> HttpResponse:
    move = get_object_or_404(
        MoveRequest.objects.select_related(
            "destination", "requested_by", "parent"
        ).prefetch_related(
            Prefetch("items", MoveItem.objects.select_related("node", "source_pool")),
            "approvals__approver",
            "children",
        ),
        pk=pk,
    )
    context = {
        "move": move,
        "events": move.events.select_related("actor").order_by("at", "id"),
        "move_running": move.state in MoveRequest.ACTIVE_STATES,
        "finished": sum(item.state in MoveItem.FINISHED for item in move.items.all()),
        "live_seconds": min(settings.LIVE_REFRESH_SECONDS, MOVE_LIVE_SECONDS),
    }
    if request.GET.get("partial") == "live":  # the part live.js fetches again
        return render(request, "pools/_move_live.html", context)
    context["actions"] = moves.allowed_actions(request.user, move)
    context["decision_form"] = decision_form or DecisionForm()
    return render(request, "pools/move_detail.html", context, status=status)


_DONE = {
    Action.APPROVE: "approval recorded",
    Action.REJECT: "rejected",
    Action.CANCEL: "cancelled",
    Action.END_LOAN: "loan ended",
    Action.EXTEND_LOAN: "loan extended",
}


def _decide(
    request: HttpRequest, pk: int, action: Action, *, reason: str, until: datetime | None = None
) -> None:
    """Take the decision through the workflow and say how it went."""
    move = get_object_or_404(MoveRequest, pk=pk)
    try:
        moves.move_decide(
            move=move,
            user=request.user,
            action=action,
            reason=reason,
            until=until,
            now=timezone.now(),
        )
    except Refused as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Move #{move.pk}: {_DONE[action]}.")


def _decide_from_form(request: HttpRequest, pk: int, action: Action) -> HttpResponse:
    form = DecisionForm(request.POST)
    if not form.is_valid():  # the page again, the reason as typed and what is wrong with it
        return _move_detail_page(request, pk, decision_form=form, status=400)
    _decide(request, pk, action, reason=form.cleaned_data["reason"])
    return redirect("move-detail", pk=pk)


@require_POST
@require(ACTION_CAPABILITY[Action.APPROVE])
def move_approve(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide_from_form(request, pk, Action.APPROVE)


@require_POST
@require(ACTION_CAPABILITY[Action.REJECT])
def move_reject(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide_from_form(request, pk, Action.REJECT)


@require_POST
@require(ACTION_CAPABILITY[Action.CANCEL])
def move_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide_from_form(request, pk, Action.CANCEL)


@require_POST
@require(ACTION_CAPABILITY[Action.APPROVE])
def move_bulk(request: HttpRequest) -> HttpResponse:
    """Approve or reject the ticked moves of the list, each through the workflow on its own."""
    action = Action.REJECT if request.POST.get("action") == "reject" else Action.APPROVE
    # Ids as the list page sends them; anything else (or beyond a database id) is no move.
    ids = [int(v) for v in request.POST.getlist("move") if v.isdigit() and len(v) <= 18]
    form = DecisionForm(request.POST)
    if not form.is_valid():  # nothing decided: the list again, saying what is wrong
        for error in form.errors["reason"]:
            messages.error(request, f"Reason: {error}")
        return _with_status(move_list(request), 400)
    try:
        outcomes = moves.moves_decide_bulk(
            move_ids=ids,
            user=request.user,
            action=action,
            reason=form.cleaned_data["reason"],
            now=timezone.now(),
        )
    except Refused as exc:  # nothing was decided: say why, keep the list
        messages.error(request, exc.message)
        return redirect("move-list")
    done = [f"#{o.move_id}" for o in outcomes if o.ok]
    if done:
        messages.success(request, f"{_DONE[action].capitalize()}: {', '.join(done)}.")
    for outcome in outcomes:
        if not outcome.ok:
            messages.error(request, f"Move #{outcome.move_id}: {outcome.message}")
    return redirect("move-list")


@require(Capability.VIEW)
def loans(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "pools/loans.html",
        {
            "loans": [(loan, moves.allowed_actions(request.user, loan)) for loan in active_loans()],
            "ended": ended_loans(),
            "now": timezone.now(),
            "reason_max_length": FREE_TEXT_MAX_LENGTH,
        },
    )


def _with_status(response: HttpResponse, status: int) -> HttpResponse:
    """A page shown again in answer to a refused form: a 4xx, not the page's usual 200."""
    response.status_code = status
    return response


LOAN_FIELDS = {"until": "Extend until", "reason": "Reason"}


@require_POST
@require(ACTION_CAPABILITY[Action.END_LOAN])
def loan_change(request: HttpRequest, pk: int) -> HttpResponse:
    form = LoanChangeForm(request.POST)
    if not form.is_valid():
        # Each field says what is wrong with it: an unreadable date is not a missing reason.
        for field, errors in form.errors.items():
            messages.error(request, f"{LOAN_FIELDS.get(field, field)}: {' '.join(errors)}")
        return _with_status(loans(request), 400)
    action = Action.END_LOAN if "end" in request.POST else Action.EXTEND_LOAN
    _decide(
        request, pk, action, reason=form.cleaned_data["reason"], until=form.cleaned_data["until"]
    )
    return redirect("loans")


class MoveForm(forms.Form):
    nodes = forms.CharField(
        help_text="Node names, separated by commas (ticking nodes on a pool page fills this).",
        widget=forms.TextInput(attrs={"placeholder": "a100-node-000, a100-node-001"}),
    )
    destination = forms.ModelChoiceField(
        queryset=Pool.objects.none(), to_field_name="name", empty_label="Choose a pool…"
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=FREE_TEXT_MAX_LENGTH,
        help_text="Why: it goes on record and to the approvers.",
    )
    drain_policy = forms.ChoiceField(
        choices=[
            ("leave-running", "Leave running pods (new pods follow the new pool)"),
            (
                "drain-first",
                "Drain first: cordon, evict GPU pods (respecting budgets), relabel, uncordon",
            ),
        ],
        initial="leave-running",
    )
    drain_deadline_minutes = forms.IntegerField(
        min_value=1,
        max_value=24 * 60,
        initial=30,
        help_text="Drain-first only: then the move fails and the node is uncordoned.",
    )
    loan_until = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="Optional (UTC): the nodes return to their pool by themselves at this time.",
    )
    health_override = forms.CharField(
        required=False,
        max_length=FREE_TEXT_MAX_LENGTH,
        help_text="Only for pools that require healthy nodes: why move a node "
        "with XID errors or without metrics anyway.",
    )
    reconcile = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, source_pool: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        destinations = Pool.objects.active()
        if self.is_reconcile:
            # A reconcile puts nodes back as their own pool says: no destination to choose,
            # nothing to lend.
            self.fields["destination"].widget = forms.HiddenInput()
            del self.fields["loan_until"]
        elif source_pool:
            destinations = destinations.exclude(name=source_pool)  # a move goes elsewhere
        self.fields["destination"].queryset = destinations

    @property
    def is_reconcile(self) -> bool:
        """Whether this is a reconcile, read as the field reads it ("False" is false)."""
        # The hidden input posts the text "False", which a template would take as true.
        return bool(self.fields["reconcile"].to_python(self["reconcile"].value()))

    def clean_nodes(self) -> list[str]:
        names = [n.strip() for n in self.cleaned_data["nodes"].split(",") if n.strip()]
        if not names:
            raise forms.ValidationError("Choose at least one node.")
        return list(dict.fromkeys(names))


class DecisionForm(forms.Form):
    reason = forms.CharField(
        required=False, max_length=FREE_TEXT_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
    )


class LoanChangeForm(forms.Form):
    until = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    reason = forms.CharField(
        max_length=FREE_TEXT_MAX_LENGTH,
        error_messages={"required": "A loan change needs a reason."},
    )
