"""`--churn N`: a busy cluster's pod traffic, N pod events a second.

Each step is what a controller does when one of its pods ends: the pod (a workload pod
bound to a node, never a DaemonSet's) is deleted, and its replacement is created bound to
the same node under a new name and uid, as a Job's or ReplicaSet's next pod would be — two
watch events (DELETED, then ADDED), the pod count and every node's GPUs unchanged, so a
long benchmark stays at the scenario's size.
"""

from __future__ import annotations

import copy
import itertools
import random
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

_SYSTEM_NAMESPACES = ("gpu-operator", "kube-system")
_GENERATED = ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp")


class Churn:
    def __init__(self, cluster: Cluster, rate: float, seed: int = 0) -> None:
        self.cluster = cluster
        self.rate = rate
        self.random = random.Random(seed)  # noqa: S311 -- simulation, not security
        self.counter = itertools.count()
        self.keys: list[str] = []

    def workload_keys(self) -> list[str]:
        pods = self.cluster.store.objects["pods"]
        return [
            key
            for key, found in pods.items()
            if not key.startswith(_SYSTEM_NAMESPACES)
            and (found.obj.get("spec") or {}).get("nodeName")
        ]

    def step(self) -> bool:
        """Replace one workload pod; False when there is none."""
        store = self.cluster.store
        with store.lock:
            while self.keys:
                index = self.random.randrange(len(self.keys))
                found = store.objects["pods"].get(self.keys[index])
                if found is not None:
                    break
                self.keys[index] = self.keys[-1]
                self.keys.pop()
            else:
                return False
            old = found.obj
            meta = old["metadata"]
            store.delete("pods", meta.get("namespace"), meta["name"])
            replacement = self._replacement(old)
            created = self.cluster.create_pod(replacement)
            new_meta = created.obj["metadata"]
            self.keys[index] = f"{new_meta['namespace']}/{new_meta['name']}"
        return True

    def _replacement(self, old: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in old["metadata"].items() if k not in _GENERATED}
        base = meta["name"].split("--", 1)[0]
        meta["name"] = f"{base}--{next(self.counter)}"
        return {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": copy.deepcopy(meta),
            "spec": copy.deepcopy(old.get("spec") or {}),
        }

    def run(self, stop: threading.Event) -> None:
        """Two events per step, steps evenly spaced, catching up after a slow one."""
        with self.cluster.store.lock:
            self.keys = self.workload_keys()
        interval = 2.0 / self.rate
        due = time.monotonic()
        while not stop.is_set():
            due += interval
            if not self.step():
                return
            stop.wait(max(0.0, due - time.monotonic()))
