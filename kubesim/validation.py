"""Object validation with the API server's own messages (apimachinery's validation package)."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from kubesim.errors import ApiError

_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

_QUALIFIED_NAME_FMT = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_FMT = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_SUBDOMAIN_FMT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_PERCENT_RE = re.compile(r"^[0-9]+%$")
_PERCENT_FMT = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  "
    "or '93%', regex used for validation is '[0-9]+%')"
)
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


@dataclass(frozen=True)
class FieldError:
    field: str
    reason: str  # FieldValueInvalid, FieldValueNotSupported, FieldValueRequired, ...
    message: str  # without the field path, as in a Status cause

    def full(self) -> str:
        return f"{self.field}: {self.message}"


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, "FieldValueInvalid", f"Invalid value: {_quote(value)}: {detail}")


def _quote(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def qualified_name_problems(key: str) -> list[str]:
    return list(_qualified_name_problems(key))


def label_value_problems(value: str) -> list[str]:
    return list(_label_value_problems(value))


# Every write checks every label of its object again, and they are mostly the same strings.
@functools.lru_cache(maxsize=65536)
def _qualified_name_problems(key: str) -> tuple[str, ...]:
    parts = key.split("/")
    if len(parts) == 1:
        name, prefix = parts[0], None
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ("prefix part must be non-empty",)
    else:
        return (
            "a qualified name "
            + _QUALIFIED_NAME_FMT
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        )
    problems: list[str] = []
    if prefix is not None:
        if len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        if not _SUBDOMAIN_RE.match(prefix):
            problems.append("prefix part " + _SUBDOMAIN_FMT)
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if name and not _NAME_RE.match(name):
        problems.append("name part " + _QUALIFIED_NAME_FMT)
    return tuple(problems)


@functools.lru_cache(maxsize=65536)
def _label_value_problems(value: str) -> tuple[str, ...]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _VALUE_RE.match(value):
        problems.append(_LABEL_VALUE_FMT)
    return tuple(problems)


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [invalid(path, labels, "must be a map of string keys to string values")]
    errors = []
    for key, value in labels.items():
        errors += [invalid(path, key, problem) for problem in _qualified_name_problems(key)]
        if not isinstance(value, str):
            errors.append(invalid(path, value, "label values must be strings"))
            continue
        errors += [invalid(path, value, problem) for problem in _label_value_problems(value)]
    return errors


def validate_taints(taints: Any, path: str) -> list[FieldError]:
    if taints is None:
        return []
    if not isinstance(taints, list):
        return [invalid(path, taints, "must be a list of taints")]
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(taints):
        at = f"{path}[{index}]"
        if not isinstance(taint, dict):
            errors.append(invalid(at, taint, "must be an object"))
            continue
        key = taint.get("key") or ""
        value = taint.get("value") or ""
        effect = taint.get("effect") or ""
        errors += [invalid(f"{at}.key", key, p) for p in _qualified_name_problems(key)]
        errors += [
            invalid(f"{at}.value", value, ";".join(problems))
            for problems in [_label_value_problems(value)]
            if problems
        ]
        if not effect:
            errors.append(FieldError(f"{at}.effect", "FieldValueRequired", "Required value"))
        elif effect not in TAINT_EFFECTS:
            supported = ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
            errors.append(
                FieldError(
                    f"{at}.effect",
                    "FieldValueNotSupported",
                    f"Unsupported value: {_quote(effect)}: supported values: {supported}",
                )
            )
        if (key, effect) in seen:
            errors.append(
                FieldError(
                    at,
                    "FieldValueDuplicate",
                    f'Duplicate value: core.Taint{{Key:"{key}", Value:"{value}", '
                    f'Effect:"{effect}", TimeAdded:<nil>}}: '
                    "taints must be unique by key and effect pair",
                )
            )
        seen.add((key, effect))
    return errors


def validate_object_meta(obj: dict[str, Any], *, namespaced: bool) -> list[FieldError]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [FieldError("metadata", "FieldValueRequired", "Required value")]
    errors = []
    name = meta.get("name")
    if not name:
        errors.append(
            FieldError(
                "metadata.name",
                "FieldValueRequired",
                "Required value: name or generateName is required",
            )
        )
    elif len(name) > 253 or not _SUBDOMAIN_RE.match(name):
        errors.append(invalid("metadata.name", name, _SUBDOMAIN_FMT))
    errors += validate_labels(meta.get("labels"), "metadata.labels")
    annotations = meta.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        errors.append(invalid("metadata.annotations", annotations, "must be a map"))
    return errors


def validate_node(node: dict[str, Any]) -> list[FieldError]:
    errors = validate_object_meta(node, namespaced=False)
    spec = node.get("spec") or {}
    # The real server names them under metadata (ValidateNode builds the taints' path from
    # "metadata"), as the differential test against kube-apiserver 1.37 showed.
    errors += validate_taints(spec.get("taints"), "metadata.taints")
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        errors.append(invalid("spec.unschedulable", unschedulable, "must be a boolean"))
    return errors


def validate_pod(pod: dict[str, Any]) -> list[FieldError]:
    errors = validate_object_meta(pod, namespaced=True)
    spec = pod.get("spec")
    if not isinstance(spec, dict) or not spec.get("containers"):
        errors.append(FieldError("spec.containers", "FieldValueRequired", "Required value"))
    return errors


def validate_pdb(pdb: dict[str, Any]) -> list[FieldError]:
    """ValidatePodDisruptionBudgetSpec, in its order and words."""
    spec = pdb.get("spec") or {}
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    errors = []
    if min_available is not None and max_unavailable is not None:
        errors.append(
            FieldError(
                "spec",
                "FieldValueInvalid",
                f"Invalid value: {_go_json(_internal_pdb_spec(spec))}: "
                "minAvailable and maxUnavailable cannot be both set",
            )
        )
    for name, value in (("minAvailable", min_available), ("maxUnavailable", max_unavailable)):
        if value is not None:
            errors += _int_or_percent_problems(value, f"spec.{name}")
    selector = spec.get("selector")
    if isinstance(selector, dict):
        errors += validate_labels(selector.get("matchLabels"), "spec.selector.matchLabels")
        for index, requirement in enumerate(selector.get("matchExpressions") or []):
            errors += _requirement_problems(requirement, f"spec.selector.matchExpressions[{index}]")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in UNHEALTHY_POD_EVICTION_POLICIES)
        errors.append(
            FieldError(
                "spec.unhealthyPodEvictionPolicy",
                "FieldValueNotSupported",
                f"Unsupported value: {_quote(policy)}: supported values: {supported}",
            )
        )
    return errors


def _internal_pdb_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The internal policy.PodDisruptionBudgetSpec as json.Marshal prints it: Go field names
    (the internal type has no JSON tags), in declaration order; the selector keeps its tags."""
    selector = spec.get("selector")
    if isinstance(selector, dict):
        tagged: dict[str, Any] = {}
        if selector.get("matchLabels"):
            tagged["matchLabels"] = dict(sorted(selector["matchLabels"].items()))
        if selector.get("matchExpressions"):
            tagged["matchExpressions"] = [
                {
                    "key": r.get("key", ""),
                    "operator": r.get("operator", ""),
                    **({"values": r["values"]} if r.get("values") else {}),
                }
                for r in selector["matchExpressions"]
            ]
        selector = tagged
    return {
        "MinAvailable": spec.get("minAvailable"),
        "Selector": selector,
        "MaxUnavailable": spec.get("maxUnavailable"),
        "UnhealthyPodEvictionPolicy": spec.get("unhealthyPodEvictionPolicy"),
    }


def _go_json(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _int_or_percent_problems(value: Any, path: str) -> list[FieldError]:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if isinstance(value, str):
        if not _PERCENT_RE.match(value):
            return [invalid(path, value, _PERCENT_FMT)]
        if int(value[:-1]) > 100:
            return [invalid(path, value, "must not be greater than 100%")]
        return []
    if isinstance(value, int) and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


def _requirement_problems(requirement: Any, path: str) -> list[FieldError]:
    """ValidateLabelSelectorRequirement."""
    if not isinstance(requirement, dict):
        return []
    errors = []
    operator, values = requirement.get("operator") or "", requirement.get("values") or []
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(
                FieldError(
                    f"{path}.values",
                    "FieldValueRequired",
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                )
            )
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(
                FieldError(
                    f"{path}.values",
                    "FieldValueForbidden",
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    else:
        errors.append(invalid(f"{path}.operator", operator, "not a valid selector operator"))
    key = requirement.get("key") or ""
    errors += [invalid(f"{path}.key", key, p) for p in _qualified_name_problems(key)]
    for index, value in enumerate(values):
        if isinstance(value, str):
            errors += [
                invalid(f"{path}.values[{index}]", value, p) for p in _label_value_problems(value)
            ]
    return errors


def invalid_error(kind: str, name: str, errors: list[FieldError], group: str = "") -> ApiError:
    """422 Invalid, shaped like the API server's (one message, one cause per field)."""
    listed = [error.full() for error in errors]
    joined = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": e.reason, "message": e.message, "field": e.field} for e in errors],
    }
    if group:
        details["group"] = group
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {joined}', details)
