"""The addresses kubesim gives nodes and pods.

A pod's IP comes from its namespace and name, not from a pool: the API server's kubelet
(kubesim.cluster), the DaemonSet controller and the real kubelet's stand-in
(kubesim.kubelet) all give a pod the same address without asking one another.
"""

from __future__ import annotations

import zlib
from typing import Any

from kubesim.store import Store


def pod_ip(pod: dict[str, Any]) -> str:
    number = zlib.crc32(f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}".encode())
    return f"10.{244 + number % 8}.{(number >> 8) % 256}.{(number >> 16) % 254 + 1}"


def node_ip(store: Store, node_name: str) -> str:
    """The node's InternalIP as its status lists it; empty for a node that is gone."""
    node = store.objects["nodes"].get(node_name)
    for address in ((node.obj.get("status") or {}).get("addresses") or []) if node else []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return ""
