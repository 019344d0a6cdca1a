"""Links out to the team's own tools (a Grafana dashboard for a node or a pool).

A link is a URL template with named placeholders, ``https://grafana/d/dcgm?var-Hostname={node}``.
The value is percent-encoded before it goes in, so a name can never add a query parameter
or change the host.
"""

from __future__ import annotations

import string
from urllib.parse import quote, urlsplit

_SCHEMES = {"http", "https"}


def template_problem(template: str, placeholder: str) -> str | None:
    """Why `template` is not a usable link template with the one `placeholder`, or None."""
    try:
        parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template)]
    except ValueError as exc:  # an unmatched brace
        return f"cannot read the template ({exc})"
    fields = [f for f, _, _ in parsed if f is not None]
    unknown = sorted({f for f in fields if f != placeholder})
    if unknown:
        names = ", ".join("{" + f + "}" for f in unknown)
        return f"only {{{placeholder}}} may be used, found {names}"
    if placeholder not in fields:
        return f"expected the placeholder {{{placeholder}}}"
    if any(spec or conv for f, spec, conv in parsed if f is not None):
        return f"{{{placeholder}}} takes no format spec or conversion"
    parts = urlsplit(template.replace("{" + placeholder + "}", "x"))
    if parts.scheme not in _SCHEMES or not parts.netloc:
        return "expected an http:// or https:// URL with a host"
    return None


def link(template: str, placeholder: str, value: str) -> str:
    """The template with `value` percent-encoded in place of its placeholder."""
    return template.replace("{" + placeholder + "}", quote(value, safe=""))
