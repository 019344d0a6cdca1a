"""Small formatting filters: a missing figure shows as a dash, never as zero."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

from pools.core import wording
from pools.core.xid import xid_meaning as _xid_meaning

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
def cores(milli: float | None) -> str:
    """Millicores as cores, the unit people size nodes in: `8 cores`, `0.5 cores`; nothing
    requested shows as a dash, not `0 m`."""
    if not milli:
        return "—"
    value = milli / 1000
    text = f"{value:,.0f}" if value == int(value) else f"{value:,.2f}".rstrip("0")
    return f"{text} core{'' if value == 1 else 's'}"


@register.filter
def binary_size(size: float | None) -> str:
    """Bytes in the binary units the framebuffer is shown in (`64.0 GiB`, `512.0 MiB`);
    nothing requested shows as a dash, not `0 bytes`."""
    if not size:
        return "—"
    if size >= 2**30:
        return f"{size / 2**30:,.1f} GiB"
    return f"{size / 2**20:,.1f} MiB"


@register.filter
def cluster_query(cluster: str) -> str:
    """`?cluster=<name>` for a link to a row of `cluster` when the portal serves several (the
    page then opens in the row's cluster, whatever the reader last chose), else nothing."""
    if not settings.OTHER_CLUSTERS:
        return ""
    return "?" + urlencode({"cluster": cluster})


@register.filter
def xid_meaning(code: int | None) -> str:
    return "" if code is None else _xid_meaning(int(code))


@register.filter
def human(code: str | None) -> str:
    """A state or kind code as people read it (`partially_failed` -> `Partially failed`)."""
    return "" if code is None else wording.human_label(str(code))


@register.filter
def drift_text(drift: dict[str, object] | None) -> str:
    """A drifted node's differences, joined, ending with a full stop."""
    phrases = wording.drift_phrases(drift or {})
    return "; ".join(phrases) + "." if phrases else ""


@register.filter
def pool_class(name: str | None) -> str:
    """The class that gives a pool's chip or card its colour (pools.pages.fleet.pool_colours)."""
    return f"pool-colour-{name}" if name else "pool-unassigned"


@register.simple_tag(takes_context=True)
def sort_link(context: template.Context, field: str) -> str:
    """The query string that sorts by `field`, flipping direction on a second click."""
    query = context["request"].GET.copy()
    current = query.get("sort", "name")
    query["sort"] = f"-{field}" if current == field else field
    query.pop("partial", None)
    query.pop("page", None)  # a new order starts at its first page
    return "?" + query.urlencode()


@register.simple_tag(takes_context=True)
def page_link(context: template.Context, number: int) -> str:
    """The query string of page `number` of the same list: its filters and sort kept."""
    query = context["request"].GET.copy()
    query.pop("partial", None)
    query["page"] = str(number)
    return "?" + query.urlencode()


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds as the two largest units: 90 -> "1m 30s", 93784 -> "1d 2h"."""
    if seconds is None:
        return "—"
    left = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
    return " ".join(parts[:2])


@register.filter
def share(value: float | None) -> str:
    """A share (0 to 1) as a percentage."""
    return "—" if value is None else f"{100 * value:.0f} %"


@register.filter
def get(mapping: dict, key: str) -> object:  # type: ignore[type-arg]
    return mapping.get(key) if mapping else None


@register.filter
def epoch(seconds: float | None) -> str:
    """Epoch seconds as a UTC date and time."""
    if seconds is None:
        return "—"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")


@register.filter
def breakable(text: object) -> str:
    """The text escaped, with a line-break opportunity after each dot and slash: a label
    key (`nvidia.com/gpu.product`) wraps between its parts on a phone, not inside them."""
    escaped = str(conditional_escape(text))
    return mark_safe(re.sub(r"([./])", r"\1<wbr>", escaped))  # noqa: S308 (escaped above)
