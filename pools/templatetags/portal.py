"""Small formatting filters: a missing figure shows as a dash, never as zero."""

from __future__ import annotations

from django import template

from pools.core import labels
from pools.xid import xid_meaning as _xid_meaning

register = template.Library()


@register.filter
def pct(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:.{digits}f} %"


@register.filter
def num(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


@register.filter
def gib(mib: float | None) -> str:
    return "—" if mib is None else f"{mib / 1024:,.1f} GiB"


@register.filter
def xid_meaning(code: int | None) -> str:
    return "" if code is None else _xid_meaning(int(code))


@register.filter
def human(code: str | None) -> str:
    """A state or kind code as people read it (`partially_failed` -> `Partially failed`)."""
    return "" if code is None else labels.human_label(str(code))


@register.filter
def drift_text(drift: dict[str, object] | None) -> str:
    """A drifted node's differences, joined, ending with a full stop."""
    phrases = labels.drift_phrases(drift or {})
    return "; ".join(phrases) + "." if phrases else ""


@register.filter
def pool_class(name: str | None) -> str:
    """The class that gives a pool's chip or card its colour (pools.views.pool_colours)."""
    return f"pool-colour-{name}" if name else "pool-unassigned"


@register.simple_tag(takes_context=True)
def sort_link(context: template.Context, field: str) -> str:
    """The query string that sorts by `field`, flipping direction on a second click."""
    query = context["request"].GET.copy()
    current = query.get("sort", "name")
    query["sort"] = f"-{field}" if current == field else field
    query.pop("partial", None)
    return "?" + query.urlencode()
