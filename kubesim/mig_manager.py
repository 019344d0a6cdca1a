"""A node's GPU shape as the NVIDIA GPU operator makes it, and the operator's mig-manager and
device plugin that change it when asked to.

A node's GPUs are whole, split into MIG instances (kubesim.mig) or shared
(kubesim.sharing): its `GpuShape`, which GPU feature discovery's (GFD) labels and the device
plugin's resources tell. An operator (the portal) asks for another shape with a label:

- `nvidia.com/mig.config` (`all-<profile>` or `all-disabled`): mig-manager sets
  `nvidia.com/mig.config.state=pending`, repartitions the GPUs `delay` seconds later (on the
  cluster clock), the node then advertises the new layout in its MIG strategy (capacity,
  allocatable and GFD's labels), and the state becomes `success`. An unknown configuration,
  a GPU that is not MIG-capable, or a failure injected for the node (`Faults.fail_mig`, or
  POST /kubesim/faults {"mig_failures": {NODE: 1}}) end in `failed` with nothing else
  changed. As the real mig-manager, it repartitions no GPU a pod holds: while GPU pods are
  bound to the node (terminating ones included) the state stays `pending`, and the work
  is done once the last of them is gone (the portal drains the node first).
- `nvidia.com/device-plugin.config` (`time-sliced-N`, `mps-N`, either `-renamed`, or
  `default`): the device plugin's config manager restarts it with that configuration
  `delay` seconds later, and the node advertises the sharing. Pods keep running (a plugin
  restart stops none), and an unknown name changes nothing (the real one keeps its
  configuration and logs the error; there is no state label to report it).

The label change is noticed as the store records it, and the work is done by the cluster
clock's timers: a test steps through it with POST /kubesim/clock {"advance": seconds}.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim import apply, mig, sharing
from kubesim.mig import MigLayout
from kubesim.scheduling import gpu_request, is_active
from kubesim.sharing import Sharing
from kubesim.store import Entry

if TYPE_CHECKING:
    from kubesim.clock import Callback
    from kubesim.cluster_view import ClusterView
    from kubesim.faults import Faults

DEFAULT_DELAY = 5.0  # seconds from the label's change to the new shape being advertised
PENDING, SUCCESS, FAILED = "pending", "success", "failed"
MIG_MANAGER = "nvidia-mig-manager"
# The configurations asked for (by an operator, or the portal) and mig-manager's answer:
# GFD's relabelling leaves them alone.
REQUESTED_LABELS = frozenset({mig.CONFIG_LABEL, mig.CONFIG_STATE_LABEL, sharing.CONFIG_LABEL})


@dataclass(frozen=True)
class GpuShape:
    """What the GPU operator made of a node's `gpus` GPUs: whole, MIG instances, or shared."""

    model: str  # GFD's product label without a MIG or sharing suffix
    gpus: int  # the physical GPUs
    memory_mib: int  # of a whole GPU
    layout: MigLayout | None = None
    shared: Sharing | None = None  # only for whole GPUs

    def labels(self) -> dict[str, str]:
        """GFD's labels for the GPUs (those it changes with the shape)."""
        whole = {
            mig.PRODUCT_LABEL: self.model,
            mig.COUNT_LABEL: str(self.gpus),
            mig.MEMORY_LABEL: str(self.memory_mib),
        }
        if self.layout is not None:
            return {**whole, **mig.node_labels(self.model, self.gpus, self.memory_mib, self.layout)}
        if self.shared is not None:
            return {**whole, **sharing.node_labels(self.model, self.gpus, self.shared)}
        return whole

    def resources(self) -> dict[str, int]:
        """What the device plugin advertises."""
        if self.layout is not None:
            return mig.node_resources(self.gpus, self.layout)
        if self.shared is not None:
            return sharing.node_resources(self.gpus, self.shared)
        return {mig.GPU_RESOURCE: self.gpus}

    @classmethod
    def of(cls, labels: dict[str, str]) -> GpuShape:
        """The shape a node's labels tell (GFD's, not the requested configurations: while
        a reconfiguration is pending the node keeps its old shape)."""
        layout = mig.layout_of(labels)
        shared = None if layout is not None else sharing.sharing_of(labels)
        # Under the single strategy GFD counts the instances.
        per_gpu = layout.per_gpu if layout is not None and layout.strategy == mig.SINGLE else 1
        return cls(
            model=mig.parent_model(labels.get(mig.PRODUCT_LABEL, "")),
            gpus=int(labels.get(mig.COUNT_LABEL) or 0) // per_gpu,
            memory_mib=mig.full_gpu_memory(labels, layout),
            layout=layout,
            shared=shared,
        )


def _labels(found: Entry) -> dict[str, str]:
    return found.obj["metadata"].get("labels") or {}


class MigManager:
    """On kubesim's own server: watches the nodes' configuration labels."""

    def __init__(self, cluster: ClusterView, faults: Faults, delay: float = DEFAULT_DELAY) -> None:
        self.cluster = cluster
        self.faults = faults
        self.delay = delay
        # node -> (the mig.config being applied, a ticket): a later change of the label
        # takes a new ticket, and the timers of the earlier one find theirs stale.
        self._applying: dict[str, tuple[str, int]] = {}
        self._draining: set[str] = set()  # applying, once their GPU pods are gone
        self._tickets = itertools.count()
        cluster.store.listeners.append(self._note)
        # A reconfiguration under way when a --state file was saved starts over.
        for name, found in self._nodes.items():
            config = _labels(found).get(mig.CONFIG_LABEL)
            if config and _labels(found).get(mig.CONFIG_STATE_LABEL) == PENDING:
                self._later(0, functools.partial(self._begin, name, config))

    @property
    def _nodes(self) -> dict[str, Entry]:
        return self.cluster.store.objects["nodes"]

    def _later(self, seconds: float, callback: Callback) -> None:
        self.cluster.timers.at(self.cluster.store.clock.now() + seconds, callback)

    def _note(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        """A store listener: it must not write, so what it notices waits on a timer."""
        if resource == "pods":
            node = (new.obj.get("spec") or {}).get("nodeName")
            if node in self._draining:
                ticket = self._applying[node][1]
                self._later(0, lambda: self._attempt(node, ticket))
            return
        if resource != "nodes" or type_ != "MODIFIED" or old is None:
            return
        name = new.obj["metadata"]["name"]
        before, after = _labels(old), _labels(new)
        config = after.get(mig.CONFIG_LABEL)
        if config and config != before.get(mig.CONFIG_LABEL):
            self._later(0, lambda: self._begin(name, config))
        plugin_config = after.get(sharing.CONFIG_LABEL)
        if plugin_config and plugin_config != before.get(sharing.CONFIG_LABEL):
            self._later(self.delay, lambda: self._restart_plugin(name, plugin_config))

    # --- mig-manager ---
    def _begin(self, name: str, config: str) -> None:
        found = self._nodes.get(name)
        if found is None or _labels(found).get(mig.CONFIG_LABEL) != config:
            return  # changed again meanwhile: that change has its own timer
        ticket = next(self._tickets)
        self._applying[name] = (config, ticket)
        self._draining.discard(name)
        self._set_state(found, PENDING)
        self._later(self.delay, lambda: self._attempt(name, ticket))

    def _attempt(self, name: str, ticket: int) -> None:
        applying = self._applying.get(name)
        found = self._nodes.get(name)
        if applying is None or applying[1] != ticket or found is None:
            return
        config, labels = applying[0], _labels(found)
        shape = GpuShape.of(labels)
        refused = labels.get(mig.CAPABLE_LABEL) != "true" or (
            mig.config_problem(config, shape.memory_mib) is not None
        )
        if not refused and self._holds_gpus(name):
            self._draining.add(name)  # pending until the pods are gone
            return
        del self._applying[name]
        self._draining.discard(name)
        if refused or self.faults.take_mig_failure(name):
            self._set_state(found, FAILED)
            return
        layout = mig.layout_for(config, labels.get(mig.STRATEGY_LABEL) or mig.SINGLE)
        # With MIG off, the device plugin's own configuration decides the sharing.
        requested = labels.get(sharing.CONFIG_LABEL, sharing.DEFAULT_CONFIG)
        shared = None
        if layout is None and sharing.config_problem(requested) is None:
            shared = sharing.from_config(requested)
        self._advertise(name, shape, dataclasses.replace(shape, layout=layout, shared=shared))
        self._set_state(self._nodes[name], SUCCESS)

    def _holds_gpus(self, name: str) -> bool:
        _, pods = self.cluster.store.pods_on(name)
        return any(is_active(e.obj) and gpu_request(e.obj) > 0 for e in pods)

    def _set_state(self, found: Entry, state: str) -> None:
        node = copy.deepcopy(found.obj)
        node["metadata"].setdefault("labels", {})[mig.CONFIG_STATE_LABEL] = state
        self.cluster.write_node(node, MIG_MANAGER)

    # --- the device plugin's config manager ---
    def _restart_plugin(self, name: str, config: str) -> None:
        found = self._nodes.get(name)
        if found is None or _labels(found).get(sharing.CONFIG_LABEL) != config:
            return
        shape = GpuShape.of(_labels(found))
        # Sharing MIG instances is not simulated: a MIG node keeps its instances.
        if sharing.config_problem(config) is not None or shape.layout is not None:
            return
        wanted = dataclasses.replace(shape, shared=sharing.from_config(config))
        if wanted != shape:
            self._advertise(name, shape, wanted)

    # --- what the node advertises ---
    def _advertise(self, name: str, old: GpuShape, new: GpuShape) -> None:
        """The device plugin registers the new resources (the kubelet's status write), then
        GFD relabels the node (nfd-master's write): two writes, as on a real node."""
        node = copy.deepcopy(self._nodes[name].obj)
        status = node.setdefault("status", {})
        # A real kubelet keeps a stopped plugin's resource, at 0, for a grace period of
        # five minutes; kubesim drops it at once.
        for key in ("capacity", "allocatable"):
            kept = {k: v for k, v in (status.get(key) or {}).items() if k not in old.resources()}
            status[key] = {**kept, **{k: str(v) for k, v in new.resources().items()}}
        self._write(node, "kubelet", subresource="status")
        node = copy.deepcopy(self._nodes[name].obj)
        labels = node["metadata"].get("labels") or {}
        # GFD labels the device plugin's MIG strategy with MIG off too.
        stale = old.labels().keys() - REQUESTED_LABELS - {mig.STRATEGY_LABEL}
        relabelled = {k: v for k, v in labels.items() if k not in stale}
        relabelled.update({k: v for k, v in new.labels().items() if k not in REQUESTED_LABELS})
        node["metadata"]["labels"] = relabelled
        self._write(node, "nfd-master")

    def _write(self, node: dict[str, Any], manager: str, subresource: str = "") -> None:
        store = self.cluster.store
        current = store.objects["nodes"][node["metadata"]["name"]]
        node = apply.record_update(
            current.obj, node, manager, store.clock.rfc3339(), subresource=subresource
        )
        store.replace("nodes", node, expected_rv=None)
