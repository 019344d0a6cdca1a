"""HTML pages: thin, they call selectors and services and render."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from pools import selectors, services
from pools.core import charts, figures
from pools.core.snippets import scheduling_block
from pools.filters import NodeFilter
from pools.fitcheck.pending import pending_pods, pool_intruders
from pools.forms import PoolForm
from pools.models import AuditEvent, Node, Pool
from pools.roles import Capability, has_capability, require


def _chart(points: list[tuple[float, float]], **options: object) -> SafeString:
    # charts.line_chart escapes every text it puts in the SVG.
    return mark_safe(charts.line_chart(points, **options))  # type: ignore[arg-type]  # noqa: S308


# The filters of pools.filters.NodeFilter the pool page offers (the pool is the page's).
POOL_PAGE_FILTERS = ("gpu_model", "ready", "cordoned", "drifted", "health")


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


@require(Capability.VIEW)
def pool_detail(request: HttpRequest, name: str) -> HttpResponse:
    pool = _pool_or_unassigned(name)
    shown = NodeFilter(request.GET, queryset=selectors.pool_nodes(pool)).qs
    page = selectors.pool_page(pool, shown=shown, sort=request.GET.get("sort", "name"))
    context = {
        "page": page,
        "pool": pool,
        "slug": name,
        "live_seconds": settings.LIVE_REFRESH_SECONDS,
        "filters": {key: request.GET.get(key, "") for key in POOL_PAGE_FILTERS},
        "health": figures.HEALTH,
    }
    if _live(request):
        return render(request, "pools/_pool_live.html", context)
    span = request.GET.get("span", "24h")
    span = span if span in selectors.HISTORY_SPANS else "24h"
    history = selectors.pool_history(pool, span)
    context.update(
        {
            "span": span,
            "spans": list(selectors.HISTORY_SPANS),
            "history_error": history.error,
            "history_chart": _chart(history.points, title=f"GPU utilisation, {span}"),
            "can_edit": has_capability(request.user, Capability.EDIT_POOLS),
        }
    )
    if pool is not None:
        context["pool_key_label"] = f"{settings.POOL_LABEL_KEY}={pool.name}"
        model = request.GET.get("snippet_model", "")
        context["snippet_model"] = model
        context["snippet"] = scheduling_block(
            pool.spec(), pool_key=settings.POOL_LABEL_KEY, gpu_models=[model] if model else None
        )
        context["pending"] = pending_pods(now=timezone.now(), pool=pool)
        context["intruders"] = pool_intruders(pool)
    return render(request, "pools/pool.html", context)


@require(Capability.VIEW)
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node.objects.select_related("pool"), name=name)
    detail = selectors.node_detail(node)
    context = {"detail": detail, "node": node, "live_seconds": settings.LIVE_REFRESH_SECONDS}
    if _live(request):
        return render(request, "pools/_node_live.html", context)
    history = selectors.node_history(node)
    context["charts"] = {
        name: _chart(
            result.points,
            title=title,
            y_max=100.0 if name == "util" else None,
            unit="%" if name == "util" else " GiB",
        )
        for name, title, result in (
            ("util", "GPU utilisation, 24h", history.get("util")),
            ("fb_used", "Framebuffer used, 24h", history.get("fb_used")),
        )
        if result is not None
    }
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
    return render(request, "pools/node.html", context)


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
                f"{saved.drifted_nodes} node(s) are now drifted and can be reconciled.",
            )
            return redirect("pool-detail", name=saved.pool.name)
        impact = selectors.pool_change_impact(candidate)
    return render(request, "pools/pool_form.html", {"form": form, "pool": pool, "impact": impact})


@require(Capability.EDIT_POOLS)
def pool_create(request: HttpRequest) -> HttpResponse:
    return _pool_form_page(request, None)


@require(Capability.EDIT_POOLS)
def pool_edit(request: HttpRequest, name: str) -> HttpResponse:
    return _pool_form_page(request, get_object_or_404(Pool.objects.active(), name=name))


@require(Capability.EDIT_POOLS)
@require_POST
def pool_retire(request: HttpRequest, name: str) -> HttpResponse:
    pool = get_object_or_404(Pool.objects.active(), name=name)
    try:
        services.pool_retire(pool=pool)
    except services.PoolInUse as exc:
        messages.error(request, exc.messages[0])
        return redirect("pool-detail", name=name)
    messages.success(request, f"Pool {name} retired.")
    return redirect("home")
