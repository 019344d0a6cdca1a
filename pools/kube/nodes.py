"""Reading nodes and pods: raw JSON, lists page by page through the official client; a
move's nodes (one node, or a chunk's by name) through the lean session
(pools/kube/session.py).

Raw dicts (`_preload_content=False`) rather than the client's model objects: decoding
5,000 nodes and 40,000 pods into models costs more than the whole rest of a sync.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from django.conf import settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pools.kube.client import api_client
from pools.kube.errors import KubeRefused
from pools.kube.retry import RetryPolicy
from pools.kube.session import node_session

Raw = dict[str, Any]


def core_api() -> client.CoreV1Api:
    return client.CoreV1Api(api_client())


def _decode(response: Any) -> Raw:
    return json.loads(response.data)


def read_node(name: str) -> Raw:
    return RetryPolicy().call(lambda: node_session().read(name), doing=f"reading node {name}")


def list_pages(list_call: Any, doing: str, page_size: int, **kwargs: Any) -> Iterator[list[Raw]]:
    policy = RetryPolicy()
    token: str | None = None
    while True:
        extra = {"_continue": token} if token else {}
        page = policy.call(
            lambda extra=extra: _decode(
                list_call(
                    limit=page_size,
                    _preload_content=False,
                    _request_timeout=settings.KUBE_TIMEOUT,
                    **kwargs,
                    **extra,
                )
            ),
            doing=doing,
        )
        yield page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


HOSTNAME_LABEL = "kubernetes.io/hostname"


def read_nodes(names: Sequence[str]) -> dict[str, Raw]:
    """Many nodes in one LIST, by the hostname label the kubelet sets (in most clusters the
    node's name). A node the LIST did not return is simply missing: read it alone."""
    if not names:
        return {}
    selector = f"{HOSTNAME_LABEL} in ({','.join(sorted(set(names)))})"
    policy, session = RetryPolicy(), node_session()
    found: dict[str, Raw] = {}
    token: str | None = None
    while True:
        page = policy.call(
            lambda token=token: session.list_page(selector, len(names), token),
            doing="listing nodes",
        )
        found.update({raw["metadata"]["name"]: raw for raw in page.get("items") or []})
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return {name: found[name] for name in names if name in found}


def node_pages(page_size: int | None = None) -> Iterator[list[Raw]]:
    return list_pages(
        core_api().list_node, "listing nodes", page_size or settings.INVENTORY_PAGE_SIZE
    )


def pod_pages(page_size: int | None = None, *, node_name: str | None = None) -> Iterator[list[Raw]]:
    selector = "status.phase!=Succeeded,status.phase!=Failed"
    if node_name:
        selector += f",spec.nodeName={node_name}"
    return list_pages(
        core_api().list_pod_for_all_namespaces,
        "listing pods",
        page_size or settings.INVENTORY_PAGE_SIZE,
        field_selector=selector,
    )


def all_pod_pages(page_size: int | None = None) -> Iterator[list[Raw]]:
    """Every pod, finished ones too (the inventory keeps when and how GPU pods ended)."""
    return list_pages(
        core_api().list_pod_for_all_namespaces,
        "listing pods",
        page_size or settings.INVENTORY_PAGE_SIZE,
    )


def node_create(raw: Raw) -> Raw:
    """Create a Node object (as a kubelet registers its node). A retry after a lost answer
    meets 409 AlreadyExists: the node is the one just created, read back."""
    name = raw["metadata"]["name"]
    try:
        return RetryPolicy().call(
            lambda: _decode(
                core_api().create_node(
                    raw, _preload_content=False, _request_timeout=settings.KUBE_TIMEOUT
                )
            ),
            doing=f"creating node {name}",
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
        return read_node(name)


def node_delete(name: str) -> bool:
    """Delete the Node object; False when it was already gone. Read first: an account that
    may not delete is refused (403) before the API server looks for the node, and a node
    that was never created needs no delete."""
    try:
        read_node(name)
    except KubeRefused as exc:
        if exc.status == 404:
            return False
        raise
    try:
        RetryPolicy().call(
            lambda: core_api().delete_node(
                name, _preload_content=False, _request_timeout=settings.KUBE_TIMEOUT
            ),
            doing=f"deleting node {name}",
        )
    except KubeRefused as exc:
        if exc.status == 404:
            return False
        raise
    return True
