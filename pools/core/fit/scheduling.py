"""Taints, tolerations and required node affinity, matched as Kubernetes matches them (pure).

From `k8s.io/api/core/v1` (`Toleration.ToleratesTaint`) and
`k8s.io/component-helpers/scheduling/corev1` (node affinity):

- A toleration with an effect matches only taints of that effect; an empty effect matches all.
- A toleration with a key matches only that key; an empty key matches every key. The API only
  accepts an empty key with `Exists` (tolerate everything), but the matcher does not check that:
  an empty key with `Equal` tolerates every taint whose value equals the toleration's value.
- `Exists` matches any value; `Equal` (or no operator) needs equal values; any other operator
  matches nothing.
- `nodeSelector` entries must all be on the node with those values; then the required node
  affinity: its terms are ORed, the requirements inside one term ANDed. A term with no
  requirement matches nothing, so does a required affinity with no term. A term whose
  requirement cannot be parsed (empty `values` for `In`, two values for `Gt`, an unknown
  operator) matches nothing either.
- `In`/`NotIn`/`Exists`/`DoesNotExist` as for label selectors (`NotIn` and `DoesNotExist` match a
  node without the label); `Gt`/`Lt` compare the node's label as a base-10 int64 and fail when
  the label is missing or not an integer. `matchFields` only knows `metadata.name`, with `In` or
  `NotIn` and exactly one value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pools.core.fit import fields as f
from pools.core.fit.fields import FieldReader
from pools.core.fit.findings import ERROR, Finding
from pools.core.names import label_key_problem, label_value_problem
from pools.core.taints import NO_EXECUTE, NO_SCHEDULE, TAINT_EFFECTS, Taint

EXISTS = "Exists"
EQUAL = "Equal"
SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")
NODE_NAME_FIELD = "metadata.name"
_INT64 = re.compile(r"^[+-]?[0-9]+$")


UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "", NO_SCHEDULE)


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", EQUAL):
            return self.value == taint.value
        return self.operator == EXISTS

    @property
    def tolerates_every_key(self) -> bool:
        return not self.key and self.operator == EXISTS

    def as_api(self) -> dict[str, str]:
        body = {"key": self.key, "operator": self.operator or EQUAL}
        if self.value:
            body["value"] = self.value
        if self.effect:
            body["effect"] = self.effect
        return body


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def untolerated_taint(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint no toleration covers (TaintToleration's filter)."""
    for taint in taints:
        if taint.blocks_scheduling and not tolerated(tolerations, taint):
            return taint
    return None


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    @property
    def parse_error(self) -> str:
        """Why the scheduler cannot use the requirement (it then fails its whole term)."""
        return _requirement_error(self)

    def matches(self, labels: Mapping[str, str]) -> bool:
        op, present = self.operator, self.key in labels
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if not present or not _is_int64(labels[self.key]):
            return False
        have, want = int(labels[self.key]), int(self.values[0])
        return have > want if op == "Gt" else have < want

    def matches_name(self, name: str) -> bool:
        return (name == self.values[0]) == (self.operator == "In")


def _requirement_error(r: Requirement) -> str:
    if problem := label_key_problem(r.key):
        return f"key {r.key!r}: {problem}"
    if r.operator in ("In", "NotIn"):
        if not r.values:
            return "for 'in', 'notin' operators, values set can't be empty"
        bad = [v for v in r.values if label_value_problem(v)]
        return f"value {bad[0]!r}: {label_value_problem(bad[0])}" if bad else ""
    if r.operator in ("Exists", "DoesNotExist"):
        return "values set must be empty for exists and does not exist" if r.values else ""
    if r.operator in ("Gt", "Lt"):
        if len(r.values) != 1:
            return "for 'Gt', 'Lt' operators, exactly one value is required"
        return (
            ""
            if _is_int64(r.values[0])
            else "for 'Gt', 'Lt' operators, the value must be an integer"
        )
    return f"{r.operator!r} is not a valid node selector operator"


def _field_error(r: Requirement) -> str:
    if r.key != NODE_NAME_FIELD:
        return f"{r.key!r} is not a valid field selector key (only metadata.name)"
    if r.operator not in ("In", "NotIn"):
        return f"{r.operator!r}: matchFields only supports In and NotIn"
    return "" if len(r.values) == 1 else "must have one element"


def _is_int64(text: str) -> bool:
    return bool(_INT64.match(text)) and -(2**63) <= int(text) < 2**63


@dataclass(frozen=True)
class Term:
    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.expressions and not self.fields

    @property
    def usable(self) -> bool:
        return not any(r.parse_error for r in self.expressions) and not any(
            _field_error(r) for r in self.fields
        )

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if self.is_empty or not self.usable:
            return False
        return all(r.matches(labels) for r in self.expressions) and all(
            r.matches_name(name) for r in self.fields
        )

    @property
    def uses_name(self) -> bool:
        return bool(self.fields)


@dataclass(frozen=True)
class NodePlacement:
    """What the NodeAffinity filter looks at: `nodeSelector` AND the required node affinity."""

    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[Term, ...] | None = None  # None: no required node affinity

    @property
    def constrains(self) -> bool:
        return bool(self.node_selector) or self.required_terms is not None

    @property
    def uses_name(self) -> bool:
        return any(t.uses_name for t in self.required_terms or ())

    def matches(self, labels: Mapping[str, str], name: str = "") -> bool:
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return False
        if self.required_terms is None:
            return True
        return any(term.matches(labels, name) for term in self.required_terms)

    def named_nodes(self) -> frozenset[str] | None:
        """NodeAffinity's PreFilter: when every term pins `metadata.name In [...]`, only those
        nodes are evaluated at all (None: every node is)."""
        if not self.required_terms:
            return None
        names: set[str] = set()
        for term in self.required_terms:
            pinned: set[str] | None = None
            for r in term.fields:
                if r.key == NODE_NAME_FIELD and r.operator == "In":
                    pinned = set(r.values) if pinned is None else pinned & set(r.values)
            if pinned is None:
                return None
            names |= pinned
        return frozenset(names)

    def requires_value(self, key: str) -> frozenset[str] | None:
        """The values of label `key` every matching node must carry (None: not pinned)."""
        allowed: set[str] | None = None
        for k, v in self.node_selector:
            if k == key:
                allowed = {v}
        if self.required_terms:
            per_term = [_term_values(t, key) for t in self.required_terms]
            if all(values is not None for values in per_term):
                union = set().union(*[v for v in per_term if v is not None])
                allowed = union if allowed is None else allowed & union
        return None if allowed is None else frozenset(allowed)


def _term_values(term: Term, key: str) -> set[str] | None:
    values: set[str] | None = None
    for r in term.expressions:
        if r.key == key and r.operator == "In":
            values = set(r.values) if values is None else values & set(r.values)
    return values


# --- reading them from a pod spec, with the API server's validation messages ---

TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
REQUIREMENT_FIELDS = ("key", "operator", "values")


def read_tolerations(
    reader: FieldReader, spec: Mapping[str, Any], path: str, findings: list[Finding]
) -> tuple[Toleration, ...]:
    base = f.child(path, "tolerations")
    result = []
    for position, raw in enumerate(reader.sequence(spec.get("tolerations"), base)):
        at = f.index(base, position)
        body = reader.mapping(raw, at)
        findings += _unknown(reader, body, at, TOLERATION_FIELDS)
        toleration = Toleration(
            reader.string(body.get("key"), f.child(at, "key")),
            reader.string(body.get("operator"), f.child(at, "operator")),
            reader.string(body.get("value"), f.child(at, "value")),
            reader.string(body.get("effect"), f.child(at, "effect")),
        )
        findings += toleration_findings(toleration, at, "tolerationSeconds" in body)
        result.append(toleration)
    return tuple(result)


def toleration_findings(t: Toleration, path: str, has_seconds: bool) -> list[Finding]:
    problems: list[tuple[str, str]] = []
    if t.key and (problem := label_key_problem(t.key)):
        problems.append(("key", f"Invalid value: {f.quoted(t.key)}: {problem}"))
    if not t.key and t.operator != EXISTS:
        problems.append(
            (
                "operator",
                f"Invalid value: {f.quoted(t.operator)}: operator must be Exists when `key` is "
                'empty, which means "match all values and all keys"',
            )
        )
    if t.operator in ("", EQUAL) and (problem := label_value_problem(t.value)):
        problems.append(("value", f"Invalid value: {f.quoted(t.value)}: {problem}"))
    elif t.operator == EXISTS and t.value:
        problems.append(
            (
                "operator",
                f"Invalid value: {f.quoted(t.value)}: value must be empty when `operator` is "
                "'Exists'",
            )
        )
    elif t.operator not in ("", EQUAL, EXISTS):
        problems.append(
            (
                "operator",
                f'Unsupported value: {f.quoted(t.operator)}: supported values: "Equal", "Exists"',
            )
        )
    if t.effect and t.effect not in TAINT_EFFECTS:
        # The API server lists the supported values sorted.
        supported = ", ".join(f'"{e}"' for e in sorted(TAINT_EFFECTS))
        problems.append(
            ("effect", f"Unsupported value: {f.quoted(t.effect)}: supported values: {supported}")
        )
    if has_seconds and t.effect != NO_EXECUTE:
        problems.append(
            (
                "effect",
                f"Invalid value: {f.quoted(t.effect)}: effect must be 'NoExecute' when "
                "`tolerationSeconds` is set",
            )
        )
    return [
        Finding("invalid-toleration", ERROR, f"{f.child(path, name)}: {message}", path=path)
        for name, message in problems
    ]


def read_placement(
    reader: FieldReader, spec: Mapping[str, Any], path: str, findings: list[Finding]
) -> NodePlacement:
    selector = reader.string_map(spec.get("nodeSelector"), f.child(path, "nodeSelector"))
    affinity_path = f.child(path, "affinity")
    affinity = reader.mapping(spec.get("affinity"), affinity_path)
    findings += _unknown(
        reader, affinity, affinity_path, ("nodeAffinity", "podAffinity", "podAntiAffinity")
    )
    node_path = f.child(affinity_path, "nodeAffinity")
    node = reader.mapping(affinity.get("nodeAffinity"), node_path)
    required_name = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred_name = "preferredDuringSchedulingIgnoredDuringExecution"
    findings += _unknown(reader, node, node_path, (required_name, preferred_name))
    terms = None
    if node.get(required_name) is not None:
        required_path = f.child(node_path, required_name)
        required = reader.mapping(node.get(required_name), required_path)
        findings += _unknown(reader, required, required_path, ("nodeSelectorTerms",))
        terms = read_terms(reader, required.get("nodeSelectorTerms"), required_path, findings)
    return NodePlacement(tuple(sorted(selector.items())), terms)


def read_terms(
    reader: FieldReader, raw: object, path: str, findings: list[Finding]
) -> tuple[Term, ...]:
    base = f.child(path, "nodeSelectorTerms")
    items = reader.sequence(raw, base)
    if not items:
        message = f"{base}: Required value: must have at least one node selector term"
        findings.append(Finding("invalid-affinity", ERROR, message, path=base))
    terms = []
    for position, item in enumerate(items):
        at = f.index(base, position)
        body = reader.mapping(item, at)
        findings += _unknown(reader, body, at, ("matchExpressions", "matchFields"))
        expressions = _read_requirements(
            reader, body.get("matchExpressions"), f.child(at, "matchExpressions"), findings
        )
        names = _read_requirements(
            reader, body.get("matchFields"), f.child(at, "matchFields"), findings
        )
        term = Term(expressions, names)
        findings += _term_findings(term, at)
        terms.append(term)
    return tuple(terms)


def _read_requirements(
    reader: FieldReader, raw: object, path: str, findings: list[Finding]
) -> tuple[Requirement, ...]:
    result = []
    for position, item in enumerate(reader.sequence(raw, path)):
        at = f.index(path, position)
        body = reader.mapping(item, at)
        findings += _unknown(reader, body, at, REQUIREMENT_FIELDS)
        result.append(
            Requirement(
                reader.string(body.get("key"), f.child(at, "key")),
                reader.string(body.get("operator"), f.child(at, "operator")),
                tuple(reader.strings(body.get("values"), f.child(at, "values"))),
            )
        )
    return tuple(result)


def _term_findings(term: Term, path: str) -> list[Finding]:
    findings = []
    for group, requirements, check in (
        ("matchExpressions", term.expressions, _requirement_error),
        ("matchFields", term.fields, _field_error),
    ):
        for position, r in enumerate(requirements):
            if problem := check(r):
                at = f.index(f.child(path, group), position)
                message = (
                    f"{at}: {problem}; the scheduler cannot use this term, so it matches no node"
                )
                findings.append(Finding("invalid-affinity", ERROR, message, path=at))
    if term.is_empty:
        message = f"{path}: an empty node selector term matches no node"
        findings.append(Finding("invalid-affinity", ERROR, message, path=path))
    return findings


def _unknown(
    reader: FieldReader, body: dict[str, Any], path: str, allowed: Iterable[str]
) -> list[Finding]:
    return [
        Finding(
            "unknown-field",
            ERROR,
            f'{at}: unknown field "{at}" (strict decoding refuses it, and it does nothing)',
            path=at,
        )
        for at in reader.unknown_fields(body, path, allowed)
    ]
