"""Discovery documents and server-side Table rendering, as kubectl asks for them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubesim.daemonsets import DAEMONSET_COLUMNS, daemonset_cells
from kubesim.events import EVENT_COLUMNS, event_cells

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_RW = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

CORE_RESOURCES = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "events",
            "singularName": "event",
            "namespaced": True,
            "kind": "Event",
            "verbs": _RW,
            "shortNames": ["ev"],
        },
        {
            "name": "namespaces",
            "singularName": "namespace",
            "namespaced": False,
            "kind": "Namespace",
            "verbs": ["get", "list"],
            "shortNames": ["ns"],
        },
        {
            "name": "nodes",
            "singularName": "node",
            "namespaced": False,
            "kind": "Node",
            "verbs": _RW,
            "shortNames": ["no"],
        },
        {
            "name": "nodes/status",
            "singularName": "",
            "namespaced": False,
            "kind": "Node",
            "verbs": ["get", "patch", "update"],
        },
        {
            "name": "pods",
            "singularName": "pod",
            "namespaced": True,
            "kind": "Pod",
            "verbs": _RW,
            "shortNames": ["po"],
            "categories": ["all"],
        },
        {
            "name": "pods/eviction",
            "singularName": "",
            "namespaced": True,
            "group": "policy",
            "version": "v1",
            "kind": "Eviction",
            "verbs": ["create"],
        },
        {
            "name": "pods/status",
            "singularName": "",
            "namespaced": True,
            "kind": "Pod",
            "verbs": ["get", "patch", "update"],
        },
    ],
}

POLICY_RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "policy/v1",
    "resources": [
        {
            "name": "poddisruptionbudgets",
            "singularName": "poddisruptionbudget",
            "namespaced": True,
            "kind": "PodDisruptionBudget",
            "verbs": _RW,
            "shortNames": ["pdb"],
        },
    ],
}

APPS_RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "apps/v1",
    "resources": [
        {
            "name": "daemonsets",
            "singularName": "daemonset",
            "namespaced": True,
            "kind": "DaemonSet",
            "verbs": ["get", "list", "watch"],
            "shortNames": ["ds"],
            "categories": ["all"],
        },
    ],
}

EVENTS_RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "events.k8s.io/v1",
    "resources": [
        {
            "name": "events",
            "singularName": "event",
            "namespaced": True,
            "kind": "Event",
            "verbs": ["get", "list", "watch"],
            "shortNames": ["ev"],
        },
    ],
}


def _read_only(name: str, kind: str, namespaced: bool, short: str = "") -> dict[str, Any]:
    resource = {
        "name": name,
        "singularName": kind.lower(),
        "namespaced": namespaced,
        "kind": kind,
        "verbs": ["get", "list", "watch"],
    }
    return {**resource, "shortNames": [short]} if short else resource


RESOURCE_RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "resource.k8s.io/v1",
    "resources": [
        _read_only("deviceclasses", "DeviceClass", False),
        _read_only("resourceclaims", "ResourceClaim", True),
        _read_only("resourceclaimtemplates", "ResourceClaimTemplate", True),
        _read_only("resourceslices", "ResourceSlice", False),
    ],
}


def _group(name: str) -> dict[str, Any]:
    version = {"groupVersion": f"{name}/v1", "version": "v1"}
    return {"name": name, "versions": [version], "preferredVersion": version}


POLICY_GROUP = _group("policy")
GROUPS = {name: _group(name) for name in ("apps", "events.k8s.io", "policy", "resource.k8s.io")}
GROUP_RESOURCES = {
    "apps/v1": APPS_RESOURCES,
    "resource.k8s.io/v1": RESOURCE_RESOURCES,
    "events.k8s.io/v1": EVENTS_RESOURCES,
    "policy/v1": POLICY_RESOURCES,
}

# What `kubectl auth can-i` asks: SelfSubjectAccessReview and SelfSubjectRulesReview.
AUTHORIZATION_GROUP = {
    "name": "authorization.k8s.io",
    "versions": [{"groupVersion": "authorization.k8s.io/v1", "version": "v1"}],
    "preferredVersion": {"groupVersion": "authorization.k8s.io/v1", "version": "v1"},
}
AUTHORIZATION_RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "authorization.k8s.io/v1",
    "resources": [
        {
            "name": "selfsubjectaccessreviews",
            "singularName": "selfsubjectaccessreview",
            "namespaced": False,
            "kind": "SelfSubjectAccessReview",
            "verbs": ["create"],
        },
        {
            "name": "selfsubjectrulesreviews",
            "singularName": "selfsubjectrulesreview",
            "namespaced": False,
            "kind": "SelfSubjectRulesReview",
            "verbs": ["create"],
        },
    ],
}
GROUPS["authorization.k8s.io"] = AUTHORIZATION_GROUP
GROUP_RESOURCES["authorization.k8s.io/v1"] = AUTHORIZATION_RESOURCES


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_groups() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(GROUPS.values())}


def api_group(name: str) -> dict[str, Any] | None:
    if name not in GROUPS:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **GROUPS[name]}


# --- Tables (kubectl get asks for `as=Table`) ---


def human_age(timestamp: str | None, now: datetime | None = None) -> str:
    if not timestamp:
        return "<unknown>"
    created = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    seconds = int(((now or datetime.now(UTC)) - created).total_seconds())
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


def _column(name: str, type_: str, description: str, priority: int = 0, fmt: str = "") -> dict:  # type: ignore[type-arg]
    return {
        "name": name,
        "type": type_,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


NODE_COLUMNS = [
    _column("Name", "string", "Name must be unique within a namespace.", 0, "name"),
    _column("Status", "string", "The status of the node"),
    _column("Roles", "string", "The roles of the node"),
    _column(
        "Age",
        "string",
        "CreationTimestamp is a timestamp representing the server time "
        "when this object was created.",
    ),
    _column("Version", "string", "Kubelet Version reported by the node."),
    _column("Internal-IP", "string", "List of addresses reachable to the node.", 1),
    _column("External-IP", "string", "List of addresses reachable to the node.", 1),
    _column("OS-Image", "string", "OS Image reported by the node from /etc/os-release.", 1),
    _column("Kernel-Version", "string", "Kernel Version reported by the node.", 1),
    _column("Container-Runtime", "string", "Container Runtime Version reported by the node.", 1),
]

POD_COLUMNS = [
    _column("Name", "string", "Name must be unique within a namespace.", 0, "name"),
    _column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "string", "The aggregate status of the containers in this pod."),
    _column(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been "
        "restarted and when the last container in this pod has restarted.",
    ),
    _column(
        "Age",
        "string",
        "CreationTimestamp is a timestamp representing the server time "
        "when this object was created.",
    ),
    _column("IP", "string", "IP address allocated to the pod.", 1),
    _column("Node", "string", "Name of the node this pod is assigned to.", 1),
    _column("Nominated Node", "string", "Name of the node nominated by the scheduler.", 1),
    _column("Readiness Gates", "string", "Pod Readiness Gates.", 1),
]


def node_cells(node: dict[str, Any]) -> list[Any]:
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        human_age(node["metadata"].get("creationTimestamp")),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", ""),
        info.get("kernelVersion", ""),
        info.get("containerRuntimeVersion", ""),
    ]


def pod_cells(pod: dict[str, Any]) -> list[Any]:
    status = pod.get("status") or {}
    containers = (pod.get("spec") or {}).get("containers") or []
    ready = sum(1 for c in status.get("containerStatuses") or [] if c.get("ready"))
    phase = status.get("phase", "Pending")
    if pod["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    restarts = sum(int(c.get("restartCount", 0)) for c in status.get("containerStatuses") or [])
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        phase,
        str(restarts),
        human_age(pod["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        (pod.get("spec") or {}).get("nodeName") or "<none>",
        "<none>",
        "<none>",
    ]


def generic_cells(obj: dict[str, Any]) -> list[Any]:
    return [obj["metadata"]["name"], human_age(obj["metadata"].get("creationTimestamp"))]


GENERIC_COLUMNS = [NODE_COLUMNS[0], NODE_COLUMNS[3]]
TABLES = {
    "nodes": (NODE_COLUMNS, node_cells),
    "pods": (POD_COLUMNS, pod_cells),
    "daemonsets": (DAEMONSET_COLUMNS, lambda obj: daemonset_cells(obj, human_age)),
    "events": (EVENT_COLUMNS, lambda obj: event_cells(obj, human_age)),
    "eventsv1": (EVENT_COLUMNS, lambda obj: event_cells(obj, human_age)),
}


def table(resource: str, objects: list[dict[str, Any]], list_meta: dict[str, Any]) -> dict:  # type: ignore[type-arg]
    columns, cells = TABLES.get(resource, (GENERIC_COLUMNS, generic_cells))
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": [
            {
                "cells": cells(obj),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj["metadata"],
                },
            }
            for obj in objects
        ],
    }


def wants_table(accept: str) -> bool:
    return "as=Table" in accept
