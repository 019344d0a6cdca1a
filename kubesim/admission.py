"""What the real API server's defaulting and admission plugins add to an object created
through the API, before it is validated and stored.

- Nodes: defaulting gives an empty `spec` and the status's zero structs (`daemonEndpoints`,
  `nodeInfo`), and `allocatable` copied from `capacity` when absent (SetDefaults_NodeStatus);
  the TaintNodesByCondition plugin appends `node.kubernetes.io/not-ready:NoSchedule` unless
  the node carries it already. The node lifecycle controller then takes that taint off again
  unless the node's Ready condition is False (kubesim.lifecycle), as on a real cluster.
- Pods: the v1 defaulting functions (the spec's fields below; per container `resources`,
  requests from limits, `imagePullPolicy` from the image's tag, `terminationMessagePath`
  and `terminationMessagePolicy`, a port's `protocol`), the Priority plugin's
  `preemptionPolicy`, and the DefaultTolerationSeconds plugin's 300 s tolerations of
  `not-ready` and `unreachable` NoExecute unless the pod tolerates them already. The
  ServiceAccount plugin's token volume is not added.
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.lifecycle import NOT_READY, UNREACHABLE

NOT_READY_TAINT = {"key": NOT_READY, "effect": "NoSchedule"}
_NODE_INFO = [
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
]
# NodeStatus's non-pointer structs, which Go serialises even when nothing is in them.
NODE_STATUS_ZERO: dict[str, Any] = {
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
    "nodeInfo": {k: "" for k in _NODE_INFO},
}
DEFAULT_TOLERATION_SECONDS = 300
# Selectors and graceful deletion read these.
POD_SPEC_DEFAULTS: dict[str, Any] = {
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "serviceAccountName": "default",
    "serviceAccount": "default",
    "securityContext": {},
    "schedulerName": "default-scheduler",
    "enableServiceLinks": True,
    "priority": 0,
    "preemptionPolicy": "PreemptLowerPriority",
}


def admit_node(node: dict[str, Any]) -> None:
    """A node created through the API (a create or a server-side apply that creates)."""
    spec = node.get("spec")
    if not isinstance(spec, dict):
        spec = node["spec"] = {}
    taints = list(spec.get("taints") or [])
    if not any(
        isinstance(t, dict) and (t.get("key"), t.get("effect")) == (NOT_READY, "NoSchedule")
        for t in taints
    ):
        spec["taints"] = [*taints, dict(NOT_READY_TAINT)]
    status = node.get("status")
    if not isinstance(status, dict):
        status = node["status"] = {}
    for key, zero in NODE_STATUS_ZERO.items():
        status.setdefault(key, copy.deepcopy(zero))
    if status.get("capacity") and "allocatable" not in status:
        status["allocatable"] = dict(status["capacity"])


def admit_pod(pod: dict[str, Any]) -> None:
    """A new pod, whoever creates it (every pod of a real cluster went through the API).
    Containers are replaced, not changed: a caller's template may share them."""
    spec = pod.setdefault("spec", {})
    for key, value in POD_SPEC_DEFAULTS.items():
        # Shared values are safe: stored objects are replaced on write, never changed.
        spec.setdefault(key, value)
    if spec.get("serviceAccountName") != spec.get("serviceAccount"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    for kind in ("containers", "initContainers"):
        if isinstance(spec.get(kind), list):
            spec[kind] = [_container(c) if isinstance(c, dict) else c for c in spec[kind]]
    tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    added = [
        {
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
        }
        for key in (NOT_READY, UNREACHABLE)
        if not any(_tolerates_no_execute(t, key) for t in tolerations)
    ]
    if added:
        spec["tolerations"] = [*(spec.get("tolerations") or []), *added]


def _tolerates_no_execute(toleration: dict[str, Any], key: str) -> bool:
    """DefaultTolerationSeconds' test: the key or any key, NoExecute or any effect."""
    return toleration.get("key") in (key, "", None) and toleration.get("effect") in (
        "NoExecute",
        "",
        None,
    )


def _container(container: dict[str, Any]) -> dict[str, Any]:
    """SetDefaults_Container, SetDefaults_ContainerPort, and SetDefaults_Pod's requests
    from limits (a pod's only: a template keeps what it says)."""
    defaulted = dict(container)
    resources = dict(defaulted.get("resources") or {})
    limits = resources.get("limits")
    if limits:
        resources["requests"] = {**limits, **(resources.get("requests") or {})}
    defaulted["resources"] = resources
    defaulted.setdefault("terminationMessagePath", "/dev/termination-log")
    defaulted.setdefault("terminationMessagePolicy", "File")
    if not defaulted.get("imagePullPolicy"):
        latest = image_tag(str(defaulted.get("image") or "")) == "latest"
        defaulted["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    if isinstance(defaulted.get("ports"), list):
        defaulted["ports"] = [
            {**p, "protocol": p.get("protocol") or "TCP"} if isinstance(p, dict) else p
            for p in defaulted["ports"]
        ]
    return defaulted


def image_tag(image: str) -> str:
    """The tag parsers.ParseImageName finds: `latest` when the reference names neither a
    tag nor a digest. A registry's port (`host:5000/x`) is not a tag."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return tag or ("" if digest else "latest")
