"""The fleet's pages: the overview, a pool's page with its node table and chart, a node's
page, and pool definitions (create, edit, retire, restore). Thin: they call
pools.fleet's selectors and services and render."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import get_conditional_response, quote_etag
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from pools import moves
from pools.common.cluster_access import pool_label_key
from pools.common.errors import MetricsUnavailable, Refused
from pools.common.filtering import page_queryset
from pools.common.roles import Capability, has_capability, require
from pools.core import charts, figures, links, palette
from pools.core.devices import node_layouts
from pools.core.mig_configs import CONFIG_PREFIX, DISABLED, mig_profiles
from pools.core.palette import colour_pick
from pools.core.plugin_configs import PluginConfig
from pools.core.snippets import scheduling_block
from pools.fit.pending import pending_groups, pending_pods, pool_intruders
from pools.fleet import selectors, services
from pools.fleet.filters import NodeFilter
from pools.maintenance.headroom import pool_headroom
from pools.models import AuditEvent, Node, Pool
from pools.pages.charts import chart_range


def _chart(points: list[tuple[float, float]], **options: object) -> SafeString:
    # charts.line_chart escapes every text it puts in the SVG.
    return mark_safe(charts.line_chart(points, **options))  # type: ignore[arg-type]  # noqa: S308


def _x_range(span: str) -> tuple[float, float]:
    """The times a chart of the named range spans, up to now: the range chosen is the
    range drawn, however short the history."""
    now = timezone.now().timestamp()
    return now - charts.TIME_RANGES[span].total_seconds(), now


# The filters of pools.fleet.filters.NodeFilter the pool page offers (the pool is the page's).
POOL_PAGE_FILTERS = ("gpu_model", "ready", "cordoned", "drifted", "health")


def _grafana(template: str | None, placeholder: str, value: str | None) -> str | None:
    """The link out to the team's dashboard, where one is configured (GRAFANA_*_URL)."""
    return links.link(template, placeholder, value) if template and value else None


def _live(request: HttpRequest) -> bool:
    return request.GET.get("partial") == "live"


@require(Capability.VIEW)
def home(request: HttpRequest) -> HttpResponse:
    context = {"overview": selectors.overview(), "live_seconds": settings.LIVE_REFRESH_SECONDS}
    if _live(request):
        return render(request, "pools/_overview_live.html", context)
    return render(request, "pools/overview.html", context)


def _pool_or_unassigned(name: str) -> Pool | None:
    if name == selectors.UNASSIGNED:
        return None
    return get_object_or_404(Pool.objects.active(), name=name)


def _node_export_query(request: HttpRequest, pool: Pool | None) -> str:
    """The CSV export's filters: the page's own, its pool, and present nodes only."""
    query = QueryDict(mutable=True)
    for key in POOL_PAGE_FILTERS:
        if request.GET.get(key):
            query[key] = request.GET[key]
    if pool is None:
        query["unassigned"] = "true"
    else:
        query["pool"] = pool.name
    query["gone"] = "false"
    return query.urlencode()


def _node_link() -> tuple[str, str]:
    """A node page's address before and after the name: the node table links its rows
    without resolving a URL for each."""
    placeholder = "node-name"
    before, after = reverse("node-detail", kwargs={"name": placeholder}).rsplit(placeholder, 1)
    return before, after


def _headroom_part(request: HttpRequest, pool: Pool) -> HttpResponse:
    """The pool's maintenance headroom, its own request that the page fetches once loaded:
    the budgets' LIST and a large pool's pods never hold the page up."""
    return render(request, "pools/_headroom.html", {"pool": pool, "headroom": pool_headroom(pool)})


@require(Capability.VIEW)
def pool_detail(request: HttpRequest, name: str) -> HttpResponse:
    pool = _pool_or_unassigned(name)
    if pool is not None and request.GET.get("partial") == "headroom":
        return _headroom_part(request, pool)
    filter_error = None
    try:
        shown, status = page_queryset(
            NodeFilter(request.GET, queryset=selectors.pool_nodes(pool)), request
        )
    except MetricsUnavailable as exc:  # a health filter without metrics: no guessed rows
        shown, status, filter_error = selectors.pool_nodes(pool).none(), 200, exc.message
    page = selectors.pool_page(
        pool, shown=shown, sort=request.GET.get("sort", "name"), number=request.GET.get("page")
    )
    context = {
        "page": page,
        "node_link": _node_link(),
        "filter_error": filter_error,
        "pool": pool,
        "slug": name,
        "live_seconds": settings.LIVE_REFRESH_SECONDS,
        "filters": {key: request.GET.get(key, "") for key in POOL_PAGE_FILTERS},
        "export_query": _node_export_query(request, pool),
        "health": figures.HEALTH,
    }
    if _live(request):
        return render(request, "pools/_pool_live.html", context, status=status)
    span, range_status = chart_range(request)
    status = max(status, range_status)
    history = selectors.pool_history(pool, span)
    context.update(
        {
            "span": span,
            "spans": list(selectors.HISTORY_SPANS),
            "history_error": history.error,
            "history_chart": _chart(
                history.points, title=f"GPU utilisation, {span}", x_range=_x_range(span)
            ),
            "can_edit": has_capability(request.user, Capability.EDIT_POOLS),
            # "Move all that match": the filter goes to the move form, not the names.
            "match_query": urlencode(
                {"match_in": name, **{k: v for k, v in context["filters"].items() if v}}
            ),
        }
    )
    if pool is not None:
        context.update(_pool_parts(request, pool))
    return render(request, "pools/pool.html", context, status=status)


def _pool_parts(request: HttpRequest, pool: Pool) -> dict[str, object]:
    """What a pool's page shows beyond its nodes: links, the scheduling block, the pods
    waiting for it and the intruders."""
    model = request.GET.get("snippet_model", "")
    pending = pending_pods(now=timezone.now(), pool=pool)
    return {
        "grafana_url": _grafana(settings.GRAFANA_POOL_URL, "pool", pool.name),
        "pool_key_label": f"{pool_label_key()}={pool.name}",
        "snippet_model": model,
        "snippet": scheduling_block(
            pool.spec(),
            pool_key=pool_label_key(),
            gpu_models=[model] if model else None,
            resource=selectors.pool_gpu_resource(pool),
        ),
        "groups": pending_groups(pending),
        "pending_total": len(pending),
        "intruders": pool_intruders(pool),
    }


@require(Capability.VIEW)
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node.objects.select_related("pool"), name=name)
    detail = selectors.node_detail(node)
    context = {"detail": detail, "node": node, "live_seconds": settings.LIVE_REFRESH_SECONDS}
    if _live(request):
        return render(request, "pools/_node_live.html", context)
    span, status = chart_range(request)
    history = selectors.node_history(node, span)
    context["span"], context["spans"] = span, list(selectors.HISTORY_SPANS)
    context["charts"] = _node_charts(node, history, span)
    context["grafana_url"] = _grafana(settings.GRAFANA_NODE_URL, "node", node.name)
    context["history_items"] = node.move_items.select_related(
        "request__destination", "source_pool"
    ).order_by("-request__created_at")[:50]
    # The node's own events and those of the requests that included it.
    context["audit_events"] = (
        AuditEvent.objects.filter(Q(node_name=node.name) | Q(request__items__node=node))
        .distinct()
        .order_by("-at", "-id")[:20]
    )
    context["history_error"] = next((r.error for r in history.values() if r.error), None)
    context["mig_profiles"] = mig_configs_for(node)
    context["plugin_configs"] = plugin_configs_for(node)
    return render(request, "pools/node.html", context, status=status)


def mig_configs_for(node: Node) -> list[str]:
    """The MIG configurations a node may be asked to take (none: no MIG, or no pool)."""
    if node.pool_id is None or (node.labels or {}).get("nvidia.com/mig.capable") != "true":
        return []
    profiles = mig_profiles(node.gpu_model)
    return [DISABLED, *(f"{CONFIG_PREFIX}{p}" for p in profiles), *settings.MIG_CONFIGS]


def plugin_configs_for(node: Node) -> list[PluginConfig]:
    """The device plugin configurations a node may be switched to (none: no pool, its GPUs
    split into MIG instances, or none configured)."""
    if node.pool_id is None or any(
        layout.startswith("mig-") for layout in node_layouts(node.device_set())
    ):
        return []
    return sorted(settings.DEVICE_PLUGIN_CONFIGS.values(), key=lambda c: c.name)


@require_POST
@require(Capability.REQUEST_MOVE)
def node_reconfigure(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
    try:
        move = moves.reconfiguration_ask(
            requested_by=request.user,
            node_names=[node.name],
            mig_config=request.POST.get("mig_config", ""),
            plugin_config=request.POST.get("plugin_config", ""),
            reason=request.POST.get("reason", ""),
            now=timezone.now(),
        )
    except Refused as exc:
        messages.error(request, exc.message)
        return redirect("node-detail", name=node.name)
    messages.success(request, f"Reconfiguration #{move.pk} asked; it waits for approval.")
    return redirect("move-detail", pk=move.pk)


def _node_charts(
    node: Node, history: dict[str, selectors.RangeResult], span: str
) -> dict[str, SafeString]:
    """One line per GPU, as the DCGM dashboard draws them."""
    x_range = _x_range(span)
    # The framebuffer chart's top is one GPU's framebuffer (None when unknown: to the data).
    fb_capacity = node.gpu_memory_mib / 1024 or None
    return {
        name: mark_safe(  # noqa: S308  (charts.lines_chart escapes every text it writes)
            charts.lines_chart(
                result.series,
                title=f"{title}, {span}",
                y_max=y_max,
                unit=unit,
                x_range=x_range,
            )
        )
        for name, title, y_max, unit, result in (
            ("util", "GPU utilisation", 100.0, "%", history.get("util")),
            ("fb_used", "Framebuffer used", fb_capacity, "GiB", history.get("fb_used")),
            ("temp", "GPU temperature", None, "°C", history.get("temp")),
            ("power", "Power", None, "W", history.get("power")),
            ("xid", "Last XID error code", None, "", history.get("xid")),
        )
        if result is not None
    }


# --- pool management (pool admins) ---


def _pool_form_page(request: HttpRequest, pool: Pool | None) -> HttpResponse:
    form = PoolForm(request.POST or None, instance=pool)
    impact = None
    if request.method == "POST" and form.is_valid():
        candidate = form.save(commit=False)
        if "save" in request.POST:
            saved = services.pool_save(pool=candidate)
            messages.success(
                request,
                f"Pool {saved.pool.name} saved. No node was changed; "
                + ngettext(
                    "%(n)d node is now drifted and can be reconciled.",
                    "%(n)d nodes are now drifted and can be reconciled.",
                    saved.drifted_nodes,
                )
                % {"n": saved.drifted_nodes},
            )
            return redirect("pool-detail", name=saved.pool.name)
        impact = selectors.pool_change_impact(candidate)
    return render(
        request,
        "pools/pool_form.html",
        {"form": form, "pool": pool, "impact": impact},
        status=400 if form.errors else 200,  # a refused form is the client's error
    )


@require(Capability.EDIT_POOLS)
def pool_create(request: HttpRequest) -> HttpResponse:
    return _pool_form_page(request, None)


@require(Capability.EDIT_POOLS)
def pool_edit(request: HttpRequest, name: str) -> HttpResponse:
    return _pool_form_page(request, get_object_or_404(Pool.objects.active(), name=name))


@require(Capability.VIEW)
def pool_colours(request: HttpRequest) -> HttpResponse:
    """Every pool's colour as a style sheet (a class per pool): colours are data, and the
    CSP allows no inline style. Revalidated on each page (ETag), so an edit shows at once."""
    css = palette.style_sheet(Pool.objects.values_list("name", "colour"))
    etag = quote_etag(hashlib.sha256(css.encode()).hexdigest()[:32])
    response = HttpResponse(css, content_type="text/css; charset=utf-8")
    response["ETag"] = etag
    response["Cache-Control"] = "private, no-cache"
    return get_conditional_response(request, etag=etag, response=response)


@require(Capability.VIEW)
def pool_list(request: HttpRequest) -> HttpResponse:
    retired = request.GET.get("retired") == "1"
    return render(
        request,
        "pools/pool_list.html",
        {
            "pools": selectors.pools_for_list(retired=retired),
            "retired": retired,
            "can_edit": has_capability(request.user, Capability.EDIT_POOLS),
        },
    )


@require(Capability.EDIT_POOLS)
def pool_retire(request: HttpRequest, name: str) -> HttpResponse:
    """GET asks for confirmation (what retiring does, and that it can be undone); POST
    retires."""
    pool = get_object_or_404(Pool.objects.active(), name=name)
    if request.method != "POST":
        holding = Node.objects.present().filter(pool=pool).count()
        return render(request, "pools/pool_retire.html", {"pool": pool, "holding": holding})
    try:
        services.pool_retire(pool=pool)
    except services.PoolInUse as exc:
        messages.error(request, exc.messages[0])
        return redirect("pool-detail", name=name)
    messages.success(request, f"Pool {name} retired. It can be restored from the retired pools.")
    return redirect(f"{reverse('pool-list')}?retired=1")


@require(Capability.EDIT_POOLS)
@require_POST
def pool_restore(request: HttpRequest, name: str) -> HttpResponse:
    pool = get_object_or_404(Pool.objects.retired(), name=name)
    try:
        services.pool_restore(pool=pool)
    except ValidationError as exc:
        messages.error(request, f"Pool {name} cannot be restored: {' '.join(exc.messages)}")
        return redirect(f"{reverse('pool-list')}?retired=1")
    messages.success(request, f"Pool {name} restored.")
    return redirect("pool-detail", name=name)


def parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if "=" not in line:
            raise forms.ValidationError(f"Line {number}: write labels as key=value, got {line!r}.")
        key, value = (part.strip() for part in line.split("=", 1))
        if key in labels:
            raise forms.ValidationError(f"Line {number}: label {key!r} appears twice.")
        labels[key] = value
    return labels


class PoolForm(forms.ModelForm):  # type: ignore[type-arg]
    # Text areas in place of the JSON fields: one key=value (or model) a line.
    labels = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One key=value a line, besides the pool key (set from the name).",
    )
    accepted_gpu_models = forms.CharField(
        label="Accepted GPU models",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="nvidia.com/gpu.product values, one a line; empty accepts any model.",
    )
    accepted_gpu_layouts = forms.CharField(
        label="Accepted GPU layouts",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="How nodes may offer their GPUs, one a line: whole, shared, or "
        "mig-<profile> (e.g. mig-1g.10gb); empty accepts any.",
    )

    utilisation_target = forms.IntegerField(
        label="Utilisation target (%)",
        min_value=1,
        max_value=100,
        required=False,
        help_text="The average GPU utilisation the pool should reach over weeks (empty: "
        f"{Pool._meta.get_field('utilisation_target').default} %).",
    )

    class Meta:
        model = Pool
        fields = Pool.EDITABLE_FIELDS
        widgets = {"colour": forms.TextInput(attrs={"type": "color"})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True  # nodes carry it: renaming would orphan them
        self.initial["labels"] = "\n".join(
            f"{k}={v}" for k, v in sorted((self.instance.labels or {}).items())
        )
        self.initial["accepted_gpu_models"] = "\n".join(self.instance.accepted_gpu_models or [])
        self.initial["accepted_gpu_layouts"] = "\n".join(self.instance.accepted_gpu_layouts or [])
        if not self.instance.colour:  # a new pool: the first colour no other pool uses
            self.initial["colour"] = colour_pick(Pool.objects.values_list("colour", flat=True))

    def clean_utilisation_target(self) -> int:
        value = self.cleaned_data.get("utilisation_target")
        if value is None:
            return int(Pool._meta.get_field("utilisation_target").default)
        return int(value)

    def clean_labels(self) -> dict[str, str]:
        return parse_labels(self.cleaned_data.get("labels") or "")

    def clean_accepted_gpu_models(self) -> list[str]:
        text = self.cleaned_data.get("accepted_gpu_models") or ""
        return [line.strip() for line in text.splitlines() if line.strip()]

    def clean_accepted_gpu_layouts(self) -> list[str]:
        text = self.cleaned_data.get("accepted_gpu_layouts") or ""
        return [line.strip() for line in text.splitlines() if line.strip()]
