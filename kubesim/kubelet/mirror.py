"""What the DCGM exporter reads, kept from the API server's watches instead of kubesim's own
store: the nodes, the pods bound to them, and which pod holds which GPU slot.

The exporter (`kubesim.dcgm.Exporter`) reads a cluster through a few attributes; this class
offers the same ones over the watched objects, so the series are exactly the ones kubesim's
own API server exports for the same nodes and pods.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

from kubesim.cluster import Cluster, GpuOverride
from kubesim.store import Entry, entry, key_of

TERMINAL = ("Succeeded", "Failed")


@dataclass
class MirrorStore:
    lock: threading.RLock = field(default_factory=threading.RLock)
    objects: dict[str, dict[str, Entry]] = field(default_factory=lambda: {"nodes": {}, "pods": {}})

    def list(self, resource: str, namespace: str | None) -> tuple[int, list[Entry]]:
        return 0, list(self.objects[resource].values())


@dataclass
class MirrorCluster:
    store: MirrorStore = field(default_factory=MirrorStore)
    pods_on_node: dict[str, dict[str, Entry]] = field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    pod_node: dict[str, str] = field(default_factory=dict)  # pod key -> the node holding it
    device_slots: dict[str, list[str | None]] = field(default_factory=dict)
    gpu_overrides: dict[tuple[str, int], GpuOverride] = field(default_factory=dict)
    exporter_disabled: set[str] = field(default_factory=set)
    daemonsets: None = None  # the real DaemonSet controller names the exporter pods

    # The same slot assignment as kubesim's own cluster: a pod keeps its GPUs until it is
    # gone, and a newcomer takes the lowest free slots.
    gpu_holders = Cluster.gpu_holders

    def node_changed(self, node: dict[str, Any] | None, name: str) -> None:
        with self.store.lock:
            if node is None:
                self.store.objects["nodes"].pop(name, None)
            else:
                self.store.objects["nodes"][name] = entry(node)

    def pod_changed(self, pod: dict[str, Any], deleted: bool) -> None:
        meta = pod["metadata"]
        key = key_of(meta.get("namespace"), meta["name"])
        node = (pod.get("spec") or {}).get("nodeName") or ""
        with self.store.lock:
            if deleted:
                self.store.objects["pods"].pop(key, None)
            else:
                self.store.objects["pods"][key] = entry(pod)
            holds = not deleted and node and (pod.get("status") or {}).get("phase") not in TERMINAL
            # Where the pod was held, from the index: a walk over every node on each pod
            # event costs seconds of CPU a minute at thousands of nodes.
            held_on = self.pod_node.pop(key, None)
            if held_on is not None and (held_on != node or not holds):
                self.pods_on_node[held_on].pop(key, None)
            if holds:
                self.pods_on_node[node][key] = entry(pod)
                self.pod_node[key] = node
