"""Creating, reading and deleting one pod: the lack-of-resources drill's probe, a pod that
asks for more GPUs than any node of its pool has free (pools.drills.no_room)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pools.kube.client import api_client
from pools.kube.errors import KubeRefused
from pools.kube.retry import RetryPolicy

Raw = dict[str, Any]


def _core() -> client.CoreV1Api:
    return client.CoreV1Api(api_client())


def _decode(response: Any) -> Raw:
    return json.loads(response.data)  # type: ignore[no-any-return]


def pod_read(namespace: str, name: str) -> Raw:
    return RetryPolicy().call(
        lambda: _decode(
            _core().read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=settings.KUBE_TIMEOUT
            )
        ),
        doing=f"reading pod {namespace}/{name}",
    )


def pod_create(namespace: str, raw: Raw) -> Raw:
    """Create the pod. A retry after a lost answer meets 409 AlreadyExists: the pod is the
    one just created, read back."""
    name = raw["metadata"]["name"]
    try:
        return RetryPolicy().call(
            lambda: _decode(
                _core().create_namespaced_pod(
                    namespace,
                    raw,
                    _preload_content=False,
                    _request_timeout=settings.KUBE_TIMEOUT,
                )
            ),
            doing=f"creating pod {namespace}/{name}",
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
        return pod_read(namespace, name)


def pod_delete(namespace: str, name: str) -> bool:
    """Delete the pod at once (no grace: it never ran); False when it was already gone."""
    try:
        RetryPolicy().call(
            lambda: _core().delete_namespaced_pod(
                name,
                namespace,
                grace_period_seconds=0,
                _preload_content=False,
                _request_timeout=settings.KUBE_TIMEOUT,
            ),
            doing=f"deleting pod {namespace}/{name}",
        )
    except KubeRefused as exc:
        if exc.status == 404:
            return False
        raise
    return True
