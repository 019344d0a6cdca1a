"""PodDisruptionBudgets (policy/v1) as the maintenance headroom reads them: each one's
selector and the disruptions its status allows now, from one paged LIST across namespaces."""

from __future__ import annotations

from kubernetes import client

from pools.core.headroom import Budget
from pools.kube.client import api_client
from pools.kube.nodes import list_pages

PAGE_SIZE = 500


def list_budgets() -> list[Budget]:
    """Every budget of the cluster. Raises KubeError when the API server cannot say."""
    api = client.PolicyV1Api(api_client())
    found = []
    for page in list_pages(
        api.list_pod_disruption_budget_for_all_namespaces,
        "listing PodDisruptionBudgets",
        PAGE_SIZE,
    ):
        for raw in page:
            meta, spec, status = (
                raw.get("metadata") or {},
                raw.get("spec") or {},
                raw.get("status") or {},
            )
            found.append(
                Budget(
                    str(meta.get("namespace") or ""),
                    str(meta.get("name") or ""),
                    spec.get("selector") or {},
                    int(status.get("disruptionsAllowed") or 0),
                )
            )
    return found
