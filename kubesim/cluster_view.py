"""What the controllers use of the cluster they run in.

kubesim.cluster builds the controllers (graceful termination, disruption budgets, node
lifecycle) and kubesim.seeding installs the DaemonSet controller; each controller is handed
the cluster and reaches back into it. They name the cluster by this protocol, not by
kubesim.cluster's `Cluster`, so that the cluster can import them and no import runs in a
circle (a type-only import would still tie the modules into one knot to read and change).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from kubesim.clock import Timers
    from kubesim.events import EventRecorder
    from kubesim.store import Entry, Store


class ClusterView(Protocol):
    """The parts of kubesim.cluster.Cluster a controller reads, writes and waits on."""

    store: Store
    timers: Timers  # the cluster clock's timers: a grace period, a node-monitor period
    recorder: EventRecorder
    # The kubelet's first status for a bound pod: a hook may answer instead, or note it.
    start_hooks: list[Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]]

    def pods_in(self, namespace: str | None) -> list[Entry]: ...

    def write_node(self, node: dict[str, Any], manager: str) -> Entry: ...
