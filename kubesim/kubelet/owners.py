"""The scenario pods' owners as real objects: a ReplicaSet or a Job per owner a scenario
names, whose controller adopts the pods the kubelets created (they match its selector and
have no controller yet), as a controller adopts orphans on a real cluster.

Created after the pods, at the pods' count (a ReplicaSet's `replicas`, a Job's
`parallelism` and `completions`, with `manualSelector`), so the controller finds nothing to
add or remove; a pod evicted later is replaced by its controller, as in production. Without
real owners the garbage collector would delete pods whose owner does not exist.
"""

from __future__ import annotations

import collections
import copy
from typing import Any

OwnerKey = tuple[str, str, str]  # namespace, kind, name


def owners_of(pods: dict[tuple[str, str], dict[str, Any]]) -> dict[OwnerKey, list[dict[str, Any]]]:
    grouped: dict[OwnerKey, list[dict[str, Any]]] = collections.defaultdict(list)
    for (namespace, _), pod in sorted(pods.items()):
        for owner in pod["metadata"].get("ownerReferences") or []:
            grouped[(namespace, owner["kind"], owner["name"])].append(pod)
    return dict(grouped)


def orphan(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as the kubelets create it: its owner adopts it once it exists."""
    found = copy.deepcopy(pod)
    found["metadata"].pop("ownerReferences", None)
    return found


def owner_object(key: OwnerKey, pods: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """(API group, the owner's object) for the pods `key` names."""
    namespace, kind, name = key
    selector = {"matchLabels": dict(pods[0]["metadata"]["labels"])}
    spec = copy.deepcopy(pods[0]["spec"])
    spec.pop("nodeName", None)  # a replacement goes where the scheduler puts it
    template = {
        "metadata": {
            "labels": dict(pods[0]["metadata"]["labels"]),
            "annotations": dict(pods[0]["metadata"].get("annotations") or {}),
        },
        "spec": spec,
    }
    meta = {"name": name, "namespace": namespace}
    if kind == "ReplicaSet":
        template["spec"]["restartPolicy"] = "Always"  # the only policy a ReplicaSet takes
        body = {"replicas": len(pods), "selector": selector, "template": template}
        return "apps", {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": body}
    if kind == "Job":
        template["spec"]["restartPolicy"] = "Never"
        body = {
            "parallelism": len(pods),
            "completions": len(pods),
            "manualSelector": True,
            "selector": selector,
            "template": template,
        }
        return "batch", {"apiVersion": "batch/v1", "kind": kind, "metadata": meta, "spec": body}
    raise ValueError(f"kubesim kubelet: no controller for owner kind {kind!r} ({name})")
