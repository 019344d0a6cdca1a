"""Label and field selectors, parsed the way apimachinery parses them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesim.errors import ApiError

Predicate = Callable[[dict[str, Any]], bool]

_TERM_RE = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9][-A-Za-z0-9_./]*)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9_.-]*)|"
    r"(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms, depth, current = [], 0, []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def label_selector(selector: str | None) -> Predicate:
    if not selector:
        return lambda obj: True
    checks: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_terms(selector):
        match = _TERM_RE.match(term)
        if not match or (match["neg"] and (match["op"] or match["setop"])):
            raise ApiError(
                400,
                "BadRequest",
                f"unable to parse requirement: found '{term.strip()}', expected: "
                "'=', '!=', '==', 'in', notin'",
            )
        key = match["key"]
        if match["neg"]:
            checks.append(lambda labels, k=key: k not in labels)
        elif match["op"] in ("=", "=="):
            checks.append(lambda labels, k=key, v=match["value"]: labels.get(k) == v)
        elif match["op"] == "!=":
            checks.append(lambda labels, k=key, v=match["value"]: labels.get(k) != v)
        elif match["setop"]:
            values = {v.strip() for v in match["values"].split(",") if v.strip()}
            if match["setop"] == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        else:
            checks.append(lambda labels, k=key: k in labels)

    def predicate(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(check(labels) for check in checks)

    return predicate


EVENT_REFERENCE_FIELDS = (
    "kind",
    "namespace",
    "name",
    "uid",
    "apiVersion",
    "resourceVersion",
    "fieldPath",
)
FIELD_GETTERS: dict[str, dict[str, Callable[[dict[str, Any]], str]]] = {
    "nodes": {
        "metadata.name": lambda o: o["metadata"]["name"],
        "spec.unschedulable": lambda o: str(bool(o.get("spec", {}).get("unschedulable"))).lower(),
    },
    "pods": {
        "metadata.name": lambda o: o["metadata"]["name"],
        "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
        "spec.nodeName": lambda o: o.get("spec", {}).get("nodeName") or "",
        "status.phase": lambda o: o.get("status", {}).get("phase") or "",
    },
    "events": {
        **{
            f"involvedObject.{key}": lambda o, k=key: str(o.get("involvedObject", {}).get(k, ""))
            for key in EVENT_REFERENCE_FIELDS
        },
        "reason": lambda o: o.get("reason", ""),
        "type": lambda o: o.get("type", ""),
        "reportingComponent": lambda o: o.get("reportingComponent", ""),
        # The API server's "source" is the source component, or else the reporting one.
        "source": lambda o: (
            (o.get("source") or {}).get("component") or o.get("reportingComponent", "")
        ),
        "metadata.name": lambda o: o["metadata"]["name"],
        "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
    },
    "eventsv1": {
        **{
            f"regarding.{key}": lambda o, k=key: str(o.get("regarding", {}).get(k, ""))
            for key in EVENT_REFERENCE_FIELDS
        },
        "reason": lambda o: o.get("reason", ""),
        "type": lambda o: o.get("type", ""),
        "reportingController": lambda o: o.get("reportingController", ""),
        "source": lambda o: (
            (o.get("deprecatedSource") or {}).get("component") or o.get("reportingController", "")
        ),
        "metadata.name": lambda o: o["metadata"]["name"],
        "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
    },
    "daemonsets": {
        "metadata.name": lambda o: o["metadata"]["name"],
        "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
    },
}


def field_selector(resource: str, selector: str | None) -> Predicate:
    if not selector:
        return lambda obj: True
    getters = FIELD_GETTERS.get(resource, {"metadata.name": lambda o: o["metadata"]["name"]})
    checks: list[Predicate] = []
    for term in selector.split(","):
        term = term.strip()
        if not term:
            continue
        match = re.match(r"^([A-Za-z.]+)\s*(==|=|!=)\s*(.*)$", term)
        if not match:
            raise ApiError(
                400, "BadRequest", f"invalid selector: '{selector}'; can't understand '{term}'"
            )
        field, op, value = match.groups()
        if field not in getters:
            raise ApiError(400, "BadRequest", f"field label not supported: {field}")
        getter = getters[field]
        if op == "!=":
            checks.append(lambda o, g=getter, v=value: g(o) != v)
        else:
            checks.append(lambda o, g=getter, v=value: g(o) == v)
    return lambda obj: all(check(obj) for check in checks)
