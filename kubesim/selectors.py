"""Label and field selectors, parsed the way apimachinery parses them, with its messages.

Label selectors follow `labels.Parse`: `=`, `==`, `!=`, `in`, `notin`, `key`, `!key`, and
`>`/`<` on integer values, each requirement validated (key a qualified name, values label
values). Field selectors follow `fields.ParseSelector` (no whitespace trimming, `\\`
escapes) and then each kind's field-label conversion, as the list handler does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesim.errors import ApiError
from kubesim.validation import label_value_problems, qualified_name_problems

Predicate = Callable[[dict[str, Any]], bool]
LabelCheck = Callable[[dict[str, str]], bool]

BINARY_OPERATORS = ["in", "notin", "=", "==", "!=", "gt", "lt"]
_SPECIAL = set("=!(),><")
_WHITESPACE = set(" \t\r\n")
_TOKENS = {")", ",", "!", "==", "=", ">", "in", "<", "!=", "notin", "("}


class SelectorError(ValueError):
    pass


def _lex(selector: str) -> list[tuple[str, str]]:
    """(kind, literal) pairs; kind is the literal for operators, "id" or "end"."""
    items: list[tuple[str, str]] = []
    pos, n = 0, len(selector)
    while True:
        while pos < n and selector[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            items.append(("end", ""))
            return items
        if selector[pos] in _SPECIAL:
            buffer, last = "", ""
            while pos < n and selector[pos] in _SPECIAL:
                candidate = buffer + selector[pos]
                if candidate in _TOKENS:
                    buffer, last = candidate, candidate
                    pos += 1
                elif last:
                    break
                else:
                    buffer = candidate
                    pos += 1
            if not last:
                items.append(("error", f"error expected: keyword found '{buffer}'"))
            else:
                items.append((last, last))
            continue
        start = pos
        while pos < n and selector[pos] not in _SPECIAL and selector[pos] not in _WHITESPACE:
            pos += 1
        word = selector[start:pos]
        items.append((word if word in ("in", "notin") else "id", word))


class _Parser:
    def __init__(self, selector: str) -> None:
        self.items = _lex(selector)
        self.position = 0

    def _peek(self, values: bool) -> tuple[str, str]:
        kind, literal = self.items[self.position]
        return ("id" if values and kind in ("in", "notin") else kind), literal

    def _take(self, values: bool) -> tuple[str, str]:
        token = self._peek(values)
        self.position += 1
        return token

    def parse(self) -> list[tuple[str, str, list[str]]]:
        requirements = []
        while True:
            kind, literal = self._peek(True)
            if kind in ("id", "!"):
                try:
                    requirements.append(self._requirement())
                except SelectorError as exc:
                    raise SelectorError(f"unable to parse requirement: {exc}") from None
                kind, literal = self._take(True)
                if kind == "end":
                    return requirements
                if kind == ",":
                    after, literal = self._peek(True)
                    if after not in ("id", "!"):
                        raise SelectorError(f"found '{literal}', expected: identifier after ','")
                    continue
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            if kind == "end":
                return requirements
            raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> tuple[str, str, list[str]]:
        operator = ""
        kind, literal = self._take(True)
        if kind == "!":
            operator = "!"
            kind, literal = self._take(True)
        if kind != "id":
            raise SelectorError(f"found '{literal}', expected: identifier")
        _check_key(literal, "<nil>")
        key = literal
        if self._peek(True)[0] in ("end", ","):
            return _requirement(key, operator or "exists", [])
        kind, literal = self._take(False)
        operators = {"in": "in", "notin": "notin", "=": "=", "==": "==", "!=": "!="}
        operators |= {">": "gt", "<": "lt"}
        if kind not in operators:
            raise SelectorError(f"found '{literal}', expected: {', '.join(BINARY_OPERATORS)}")
        operator = operators[kind]
        values = self._set_values() if operator in ("in", "notin") else self._exact_value()
        return _requirement(key, operator, sorted(set(values)))

    def _set_values(self) -> list[str]:
        kind, literal = self._take(True)
        if kind != "(":
            raise SelectorError(f"found '{literal}' expected: '('")
        kind, literal = self._peek(True)
        if kind == ")":
            self._take(True)
            return [""]
        if kind not in ("id", ","):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            kind, literal = self._take(True)
            if kind == "id":
                values.add(literal)
                after, after_literal = self._peek(True)
                if after == ",":
                    continue
                if after == ")":
                    break
                raise SelectorError(f"found '{after_literal}', expected: ',' or ')'")
            if kind == ",":
                if not values:
                    values.add("")
                after, _ = self._peek(True)
                if after == ")":
                    values.add("")
                    break
                if after == ",":
                    values.add("")
                continue
            raise SelectorError(f"found '{literal}', expected: ',', or identifier")
        kind, _ = self._take(True)
        if kind != ")":
            raise SelectorError(f"found '{literal}', expected: ')'")
        return list(values)

    def _exact_value(self) -> list[str]:
        kind, _ = self._peek(True)
        if kind in ("end", ","):
            return [""]
        kind, literal = self._take(True)
        if kind == "id":
            return [literal]
        raise SelectorError(f"found '{literal}', expected: identifier")


def _check_key(key: str, path: str) -> None:
    problems = qualified_name_problems(key)
    if problems:
        raise SelectorError(f'{path}: Invalid value: "{key}": {"; ".join(problems)}')


def _requirement(key: str, operator: str, values: list[str]) -> tuple[str, str, list[str]]:
    """NewRequirement's checks, with its messages."""
    problems = []
    go_values = "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"
    if operator in ("in", "notin") and not values:
        problems.append(
            f"values: Invalid value: {go_values}: for 'in', 'notin' operators, "
            "values set can't be empty"
        )
    if operator in ("gt", "lt"):
        if len(values) != 1:
            problems.append(
                f"values: Invalid value: {go_values}: for 'Gt', 'Lt' operators, "
                "exactly one value is required"
            )
        for index, value in enumerate(values):
            if not re.fullmatch(r"[+-]?\d+", value):
                problems.append(
                    f"values[{index}]: Invalid value: \"{value}\": for 'Gt', 'Lt' "
                    "operators, the value must be an integer"
                )
    for index, value in enumerate(values):
        found = label_value_problems(value)
        if found:
            problems.append(f'values[{index}][{key}]: Invalid value: "{value}": {"; ".join(found)}')
    if problems:
        raise SelectorError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
    return key, operator, values


def _check(key: str, operator: str, values: list[str]) -> LabelCheck:
    wanted = set(values)
    if operator in ("in", "=", "=="):
        return lambda labels: key in labels and labels[key] in wanted
    if operator in ("notin", "!="):
        return lambda labels: key not in labels or labels[key] not in wanted
    if operator == "exists":
        return lambda labels: key in labels
    if operator == "!":
        return lambda labels: key not in labels
    bound = int(values[0])

    def compare(labels: dict[str, str]) -> bool:
        try:
            have = int(labels[key])
        except (KeyError, ValueError):
            return False
        return have > bound if operator == "gt" else have < bound

    return compare


def parse_label_selector(selector: str) -> list[LabelCheck]:
    """The checks of a selector string; SelectorError with apimachinery's message."""
    return [_check(*r) for r in _Parser(selector).parse()]


def label_selector(selector: str | None) -> Predicate:
    if not selector:
        return lambda obj: True
    try:
        checks = parse_label_selector(selector)
    except SelectorError as exc:
        raise ApiError(400, "BadRequest", str(exc)) from None

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


def selector_from_object(selector: Any) -> LabelCheck | None:
    """metav1.LabelSelectorAsSelector: None (a null selector) matches nothing, `{}` matches
    everything. Raises SelectorError for an invalid one."""
    if selector is None:
        return None
    if not isinstance(selector, dict):
        raise SelectorError("invalid label selector")
    checks: list[LabelCheck] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        _check_key(key, "key")
        checks.append(_check(*_requirement(key, "=", [str(value)])))
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or []:
        operator = operators.get(expression.get("operator"))
        if operator is None:
            raise SelectorError(
                f'"{expression.get("operator")}" is not a valid label selector operator'
            )
        key = str(expression.get("key") or "")
        _check_key(key, "key")
        values = [str(v) for v in expression.get("values") or []]
        if operator in ("exists", "!") and values:
            raise SelectorError(
                "values: Invalid value: []string{...}: values set must be empty for exists "
                "and does not exist"
            )
        checks.append(_check(*_requirement(key, operator, values)))
    return lambda labels: all(check(labels) for check in checks)


def selector_is_empty(selector: Any) -> bool:
    return isinstance(selector, dict) and not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    )


def _spec(o: dict[str, Any]) -> dict[str, Any]:
    return o.get("spec") or {}


def _status(o: dict[str, Any]) -> dict[str, Any]:
    return o.get("status") or {}


def _meta_getters() -> dict[str, Callable[[dict[str, Any]], str]]:
    return {
        "metadata.name": lambda o: o["metadata"]["name"],
        "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
    }


# Selectable fields (each kind's ToSelectableFields) by the labels conversion accepts.
FIELD_GETTERS: dict[str, dict[str, Callable[[dict[str, Any]], str]]] = {
    "nodes": {
        "metadata.name": lambda o: o["metadata"]["name"],
        "spec.unschedulable": lambda o: str(bool(_spec(o).get("unschedulable"))).lower(),
    },
    "pods": {
        **_meta_getters(),
        "spec.nodeName": lambda o: _spec(o).get("nodeName") or "",
        "spec.restartPolicy": lambda o: _spec(o).get("restartPolicy") or "",
        "spec.schedulerName": lambda o: _spec(o).get("schedulerName") or "",
        "spec.serviceAccountName": lambda o: _spec(o).get("serviceAccountName") or "",
        "spec.hostNetwork": lambda o: str(bool(_spec(o).get("hostNetwork"))).lower(),
        "status.phase": lambda o: _status(o).get("phase") or "",
        "status.podIP": lambda o: ((_status(o).get("podIPs") or [{}])[0]).get("ip") or "",
        "status.nominatedNodeName": lambda o: _status(o).get("nominatedNodeName") or "",
        # Accepted by the conversion but not a selectable field: matches as empty.
        "status.podIPs": lambda o: "",
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
        **_meta_getters(),
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
        **_meta_getters(),
    },
    "daemonsets": _meta_getters(),
    "poddisruptionbudgets": _meta_getters(),
}
# Old clients' names the conversion rewrites.
FIELD_ALIASES = {"pods": {"spec.host": "spec.nodeName"}}


def _split_terms(selector: str) -> list[str]:
    terms, current, escaped = [], "", False
    for char in selector:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            current += char
            escaped = True
        elif char == ",":
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for index in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def _unescape(value: str) -> str:
    """fields.UnescapeValue, with its error texts."""
    result, escaped = "", False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise _field_error(f"invalid escape sequence: \\{char}")
            result += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            # Go formats the rune with %v: its code point.
            raise _field_error(f"unescaped character in value: {ord(char)}")
        else:
            result += char
    if escaped:
        raise _field_error("invalid escape sequence: \\")
    return result


def _field_error(problem: str) -> ApiError:
    return ApiError(400, "BadRequest", f"invalid field selector: {problem}")


def field_selector(resource: str, selector: str | None) -> Predicate:
    if not selector:
        return lambda obj: True
    getters = FIELD_GETTERS.get(resource, {"metadata.name": lambda o: o["metadata"]["name"]})
    aliases = FIELD_ALIASES.get(resource, {})
    checks: list[Predicate] = []
    for term in _split_terms(selector):
        if term == "":
            continue
        parts = _split_term(term)
        if parts is None:
            raise ApiError(
                400, "BadRequest", f"invalid selector: '{selector}'; can't understand '{term}'"
            )
        name, operator, raw = parts
        value = _unescape(raw)
        name = aliases.get(name, name)
        if name not in getters:
            raise ApiError(400, "BadRequest", f"field label not supported: {name}")
        getter = getters[name]
        if operator == "!=":
            checks.append(lambda o, g=getter, v=value: g(o) != v)
        else:
            checks.append(lambda o, g=getter, v=value: g(o) == v)
    return lambda obj: all(check(obj) for check in checks)
