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
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


# A resource outside the core group is named with its group in messages ("daemonsets.apps"),
# and its group is in the details; kubesim stores events.k8s.io's view as "eventsv1".
_GROUPS = {
    "daemonsets": ("daemonsets", "apps"),
    "eventsv1": ("events", "events.k8s.io"),
    "poddisruptionbudgets": ("poddisruptionbudgets", "policy"),
}


def _qualified(resource: str, name: str) -> tuple[str, dict[str, Any]]:
    plural, group = _GROUPS.get(resource, (resource, ""))
    if not group:
        return resource, {"name": name, "kind": resource}
    return f"{plural}.{group}", {"name": name, "group": group, "kind": plural}


def not_found(resource: str, name: str) -> ApiError:
    qualified, details = _qualified(resource, name)
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', details)


def already_exists(resource: str, name: str) -> ApiError:
    qualified, details = _qualified(resource, name)
    return ApiError(409, "AlreadyExists", f'{qualified} "{name}" already exists', details)


def conflict(resource: str, name: str) -> ApiError:
    qualified, details = _qualified(resource, name)
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(
    user: str, verb: str, resource: str, name: str | None, namespace: str | None, group: str = ""
) -> ApiError:
    subject = f'{resource} "{name}"' if name else resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return ApiError(
        403,
        "Forbidden",
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{group}" {scope}',
        {"name": name, "kind": resource} if name else {"kind": resource},
    )


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


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
        {"Retry-After": str(retry_after)},
    )


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
