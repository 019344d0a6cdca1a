"""The project's own Kubernetes errors, with messages an operator can act on."""

from __future__ import annotations


class KubeError(Exception):
    """Anything that went wrong talking to the Kubernetes API."""

    transient = False


class KubeNotConfigured(KubeError):
    """No cluster is configured: neither KUBECONFIG nor in-cluster credentials."""


class KubeUnavailable(KubeError):
    """The API server could not be reached or answered 429/5xx: worth retrying."""

    transient = True


class KubeRefused(KubeError):
    """The API server refused the request (401, 403, 404, 422, ...): retrying will not help."""

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
