"""API errors as the real API server answers them: a `Status` object and an HTTP code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ApiError(Exception):
    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # a Status a handler returned itself may carry none (omitempty)
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


# Resources outside the core group, as kubesim stores them, with their plural and API group:
# errors name the resource qualified by its group (`poddisruptionbudgets.policy "x" not
# found`, `daemonsets.apps "x" not found`); kubesim stores events.k8s.io's view as "eventsv1".
_QUALIFIED = {
    "daemonsets": ("daemonsets", "apps"),
    "eventsv1": ("events", "events.k8s.io"),
    "poddisruptionbudgets": ("poddisruptionbudgets", "policy"),
    "resourceslices": ("resourceslices", "resource.k8s.io"),
    "deviceclasses": ("deviceclasses", "resource.k8s.io"),
    "resourceclaims": ("resourceclaims", "resource.k8s.io"),
    "resourceclaimtemplates": ("resourceclaimtemplates", "resource.k8s.io"),
    "selfsubjectaccessreviews": ("selfsubjectaccessreviews", "authorization.k8s.io"),
    "selfsubjectrulesreviews": ("selfsubjectrulesreviews", "authorization.k8s.io"),
}
GROUPS = {resource: group for resource, (_, group) in _QUALIFIED.items()}


def qualified(resource: str) -> str:
    plural, group = _QUALIFIED.get(resource, (resource, ""))
    return f"{plural}.{group}" if group else resource


def details(resource: str, name: str) -> dict[str, Any]:
    plural, group = _QUALIFIED.get(resource, (resource, ""))
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = plural
    return details


def not_found(resource: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(resource)} "{name}" not found', details(resource, name)
    )


def already_exists(resource: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource)} "{name}" already exists',
        details(resource, name),
    )


OPTIMISTIC_LOCK = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def conflict(resource: str, name: str, detail: str = OPTIMISTIC_LOCK) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource)} "{name}": {detail}',
        details(resource, name),
    )


def conflict_on_kind(resource: str, kind: str, name: str, detail: str) -> ApiError:
    """A Conflict whose GroupResource carries the Kind where the resource goes, as
    rest.BeforeDelete and the eviction handler build it (`... on Pod "x": ...`)."""
    group = GROUPS.get(resource, "")
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    qualified_kind = f"{kind}.{group}" if group else kind
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified_kind} "{name}": {detail}',
        details,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(
    user: str,
    verb: str,
    resource: str,
    name: str | None,
    namespace: str | None,
    group: str = "",
    subresource: str | None = None,
    reason: str = "",
) -> ApiError:
    """403 as the authorization filter answers it (responsewriters.forbiddenMessage)."""
    asked = f"{resource}/{subresource}" if subresource else resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    why = f'User "{user}" cannot {verb} resource "{asked}" in API group "{group}" {scope}' + (
        f": {reason}" if reason else ""
    )
    qualified_resource = f"{resource}.{group}" if group else resource
    subject = f'{qualified_resource} "{name}"' if name else qualified_resource
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = resource
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)


def forbidden_path(user: str, verb: str, path: str) -> ApiError:
    return ApiError(403, "Forbidden", f'forbidden: User "{user}" cannot {verb} path "{path}"', {})


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json"
        + (f" (got {content_type})" if content_type else ""),
    )


def method_not_allowed(method: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({method})",
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def internal_error(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def service_unavailable() -> ApiError:
    return ApiError(
        503,
        "ServiceUnavailable",
        "The server is currently unable to handle the request",
        None,
        {"Retry-After": "1"},
    )
