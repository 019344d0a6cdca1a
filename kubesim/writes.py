"""What the write path checks before anything is stored, with the real handlers' messages.

- Decoding: an unknown field is dropped with a `Warning` (`unknown field "spec.foo"`), or
  refused under `fieldValidation=Strict`; a value of the wrong JSON type (a number as a
  label value) is refused. A create or update body answers 400 (`Node in version "v1"
  cannot be handled as a Node: ...`, create.go's transformDecodeError); a patch answers 422
  on the patched object (` "" is invalid: patch: Invalid value: ...`, patch.go). A body
  naming another kind, or a version its group does not have, is a 400 before any of that.
- Update rules: `metadata.uid` and a node's `spec.podCIDRs`/`providerID` once set are
  immutable (422 with ValidateObjectMetaUpdate's and ValidateNodeUpdate's words); a PUT
  whose body names another uid fails its implied precondition (409).
- What is served back drops empty lists and maps (schema.decode).
"""

from __future__ import annotations

import json
from typing import Any

from kubesim import errors
from kubesim.errors import ApiError
from kubesim.schema import CleanSubtrees, Decoded, decode, go_print
from kubesim.store import check_preconditions, entry
from kubesim.validation import FieldError, invalid_error


def _quote(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


# The kinds the real API server's scheme knows in the group versions a body sent to kubesim
# is likely to name (each version also knows the option kinds metav1.AddToGroupVersion adds).
_OPTIONS = (
    "WatchEvent",
    "ListOptions",
    "GetOptions",
    "DeleteOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
)
_CORE_V1 = (
    *("Pod", "PodList", "PodStatusResult", "PodTemplate", "PodTemplateList"),
    *("ReplicationController", "ReplicationControllerList", "Service", "ServiceList"),
    *("ServiceProxyOptions", "Endpoints", "EndpointsList", "Node", "NodeList"),
    *("NodeConfigSource", "NodeProxyOptions", "Binding", "Event", "EventList", "List"),
    *("LimitRange", "LimitRangeList", "ResourceQuota", "ResourceQuotaList", "Namespace"),
    *("NamespaceList", "Secret", "SecretList", "ServiceAccount", "ServiceAccountList"),
    *("PersistentVolume", "PersistentVolumeList", "PersistentVolumeClaim"),
    *("PersistentVolumeClaimList", "PodAttachOptions", "PodLogOptions", "PodExecOptions"),
    *("PodPortForwardOptions", "PodProxyOptions", "ComponentStatus", "ComponentStatusList"),
    *("SerializedReference", "RangeAllocation", "ConfigMap", "ConfigMapList", "Status"),
)
_POLICY = ("Eviction", "PodDisruptionBudget", "PodDisruptionBudgetList")
_AUTHORIZATION = (
    "SubjectAccessReview",
    "SelfSubjectAccessReview",
    "LocalSubjectAccessReview",
    "SelfSubjectRulesReview",
)
REGISTERED: dict[str, frozenset[str]] = {
    version: frozenset((*kinds, *_OPTIONS))
    for version, kinds in {
        "v1": _CORE_V1,
        "policy/v1": _POLICY,
        "policy/v1beta1": _POLICY,
        "apps/v1": (
            *("Deployment", "DeploymentList", "StatefulSet", "StatefulSetList"),
            *("DaemonSet", "DaemonSetList", "ReplicaSet", "ReplicaSetList"),
            *("ControllerRevision", "ControllerRevisionList"),
        ),
        "batch/v1": ("Job", "JobList", "CronJob", "CronJobList"),
        "events.k8s.io/v1": ("Event", "EventList"),
        "authorization.k8s.io/v1": _AUTHORIZATION,
        "authorization.k8s.io/v1beta1": _AUTHORIZATION,
    }.items()
}


def check_kind(kind: str, api_version: str, body: dict[str, Any]) -> None:
    """The kind and apiVersion a body names (each defaulted to the endpoint's when absent)
    must decode to the endpoint's kind: that kind in any version of its group, else a 400
    in the words of the scheme's decoder and converter (create.go's transformDecodeError)."""
    sent_kind = str(body.get("kind") or kind)
    sent_version = str(body.get("apiVersion") or api_version)
    group = api_version.rpartition("/")[0]
    same_group = sent_version.rpartition("/")[0] == group
    if sent_kind == kind and same_group and kind in REGISTERED.get(sent_version, ()):
        return
    version = sent_version.rpartition("/")[2]
    if sent_kind in REGISTERED.get(sent_version, ()):
        internal = (group or "core").split(".")[0]
        problem = f"converting ({version}.{sent_kind}) to ({internal}.{kind}): unknown conversion"
    else:
        problem = (
            f'no kind "{sent_kind}" is registered for version "{sent_version}" in scheme '
            '"pkg/runtime/scheme.go:111"'
        )
    raise errors.bad_request(
        f'{sent_kind} in version "{version}" cannot be handled as a {kind}: {problem}'
    )


def decode_body(
    kind: str, api_version: str, body: dict[str, Any], validation: str, warnings: list[str]
) -> dict[str, Any]:
    """A create or update body as the server decodes it."""
    check_kind(kind, api_version, body)
    decoded = decode(kind, body)
    sent_kind = str(body.get("kind") or kind)
    version = str(body.get("apiVersion") or api_version).split("/")[-1]
    prefix = f'{sent_kind} in version "{version}" cannot be handled as a {kind}: '
    if decoded.mismatch is not None:
        raise errors.bad_request(prefix + decoded.mismatch.json_message())
    _unknown_fields(decoded, validation, warnings, lambda text: errors.bad_request(prefix + text))
    return decoded.obj


# What earlier patches found to decode to itself: the parts of a stored object a patch did not
# touch are not walked again (a node's status, its annotations, untouched owners' fields).
PATCHED_CLEAN = CleanSubtrees()


def decode_patched(
    kind: str,
    patched: dict[str, Any],
    patch: Any,
    *,
    strategic: bool,
    validation: str,
    warnings: list[str],
) -> dict[str, Any]:
    """A patched object as the server decodes it (into the Go type, from a map or JSON)."""
    decoded = decode(kind, patched, clean=PATCHED_CLEAN)

    def invalid(detail: str) -> ApiError:
        # A strategic merge patch is decoded from the patch map (printed with %+v); a JSON or
        # merge patch from the patched object's JSON, as Go marshals it (sorted keys).
        shown = go_print(patch) if strategic else _go_json(patched)
        cause = FieldError(
            "patch", "FieldValueInvalid", f"Invalid value: {_quote(shown)}: {detail}"
        )
        error = invalid_error("", "", [cause])
        error.details = {"causes": (error.details or {}).get("causes", [])}
        return error

    if decoded.mismatch is not None:
        mismatch = decoded.mismatch
        raise invalid(mismatch.convert_message() if strategic else mismatch.json_message())
    _unknown_fields(decoded, validation, warnings, invalid)
    return decoded.obj


def check_apply_config(kind: str, config: dict[str, Any]) -> None:
    """An applied configuration is converted to the typed schema whatever fieldValidation
    says; a field it does not declare fails that conversion with a plain error, which the
    server answers 500 (kubernetes/kubernetes#122480)."""
    decoded = decode(kind, config)
    problems = [f".{path}: field not declared in schema" for path in decoded.unknown]
    if decoded.mismatch is not None:
        problems.append(f".{decoded.mismatch.path}: expected {decoded.mismatch.go_type}")
    if not problems:
        return
    detail = problems[0] if len(problems) == 1 else "errors:\n  " + "\n  ".join(problems)
    name = (config.get("metadata") or {}).get("name", "")
    raise ApiError(
        500,
        "",
        f"failed to create typed patch object (/{name}; /v1, Kind={kind}): {detail}",
    )


def _unknown_fields(decoded: Decoded, validation: str, warnings: list[str], refuse: Any) -> None:
    if not decoded.unknown or validation == "Ignore":
        return
    problems = [f'unknown field "{path}"' for path in decoded.unknown]
    if validation == "Strict":
        raise refuse("strict decoding error: " + ", ".join(problems))
    warnings.extend(problems)


def _go_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def check_update(
    resource: str, kind: str, old: dict[str, Any], new: dict[str, Any], *, uid_precondition: bool
) -> None:
    """Fields an update may not change."""
    name = old["metadata"]["name"]
    new_uid = (new.get("metadata") or {}).get("uid")
    if uid_precondition and new_uid and new_uid != old["metadata"]["uid"]:
        check_preconditions(resource, entry(old), new_uid, None)
    problems: list[FieldError] = []
    if new_uid and new_uid != old["metadata"]["uid"]:
        problems.append(
            FieldError(
                "metadata.uid",
                "FieldValueInvalid",
                f"Invalid value: {_quote(new_uid)}: field is immutable",
            )
        )
    if resource == "nodes":
        problems += _node_update_problems(old.get("spec") or {}, new.get("spec") or {})
    if problems:
        raise invalid_error(kind, name, problems)


def _pod_cidrs(spec: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    cidrs = list(spec.get("podCIDRs") or [])
    single = spec.get("podCIDR")
    # v1 -> internal conversion: podCIDR changed on its own still changes the first CIDR.
    if single and (not cidrs or (old is not None and single != old.get("podCIDR"))):
        return [single, *cidrs[1:]]
    return cidrs


def _node_update_problems(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    problems = []
    before = _pod_cidrs(old)
    if before and _pod_cidrs(new, old) != before:
        problems.append(
            FieldError(
                "spec.podCIDRs",
                "FieldValueForbidden",
                'Forbidden: node updates may not change podCIDR except from "" to valid',
            )
        )
    if old.get("providerID") and new.get("providerID") != old.get("providerID"):
        problems.append(
            FieldError(
                "spec.providerID",
                "FieldValueForbidden",
                'Forbidden: node updates may not change providerID except from "" to valid',
            )
        )
    return problems


def check_name(obj: dict[str, Any], name: str | None, namespace: str | None) -> None:
    """patch.go / update.go checkName."""
    meta = obj.get("metadata") or {}
    if meta.get("name") != name:
        raise errors.bad_request(
            f"the name of the object ({meta.get('name') or ''}) does not match the name on the "
            f"URL ({name})"
        )
    if namespace and meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request(
            f"the namespace of the object ({meta['namespace']}) does not match the namespace on "
            f"the request ({namespace})"
        )
