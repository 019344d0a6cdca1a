"""What the real API server's defaulting and admission plugins add to an object created
through the API, before it is validated and stored.

- Nodes: defaulting gives an empty `spec` and the status's zero structs (`daemonEndpoints`,
  `nodeInfo`), and `allocatable` copied from `capacity` when absent (SetDefaults_NodeStatus);
  the TaintNodesByCondition plugin appends `node.kubernetes.io/not-ready:NoSchedule` unless
  the node carries it already. The node lifecycle controller then takes that taint off again
  unless the node's Ready condition is False (kubesim.lifecycle), as on a real cluster.
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.lifecycle import NOT_READY
from kubesim.watch import EMPTY_BODIES

NOT_READY_TAINT = {"key": NOT_READY, "effect": "NoSchedule"}


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
    for key, zero in EMPTY_BODIES["nodes"]["status"].items():
        status.setdefault(key, copy.deepcopy(zero))
    if status.get("capacity") and "allocatable" not in status:
        status["allocatable"] = dict(status["capacity"])
