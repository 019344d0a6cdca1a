"""What a drill checks (pure): the practice asks, when a node goes down, whether the portal
flags it, whether the pool's jobs find room or stay Pending, and whether the node comes
back as it was."""

from __future__ import annotations

from dataclasses import dataclass

from pools.core.insights.readiness import Check, Status

# No drill holds a node longer than this: an hour is a rehearsal, a day is an outage.
MAX_HOLD_SECONDS = 3600


@dataclass(frozen=True)
class NodeDownObservation:
    node: str
    flagged: bool  # the inventory row showed the node cordoned while it was down
    pods_before: int  # pods on the node when it went down
    pods_during: int  # pods on it at the end of the hold (a cordon evicts nothing)
    pending_before: int  # GPU pods waiting for the pool when it went down
    pending_during: int  # and at the end of the hold
    spare_nodes: int  # the pool's other schedulable nodes with every GPU free, meanwhile
    restored: bool  # the row shows the node schedulable again after the drill

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def node_down_checks(o: NodeDownObservation) -> list[Check]:
    def check(name: str, title: str, ok: bool, passed: str, failed: str) -> Check:
        return Check(
            name, title, Status.PASS if ok else Status.FAIL, passed if ok else failed, [o.node]
        )

    waiting = o.pending_during - o.pending_before
    return [
        check(
            "flagged",
            "The portal flags the node down",
            o.flagged,
            f"{o.node} showed as cordoned in the inventory while it was down.",
            f"{o.node} never showed as cordoned: the inventory missed the change.",
        ),
        check(
            "pods_kept",
            "Running pods keep running",
            o.pods_during >= o.pods_before,
            f"{o.pods_before} pod(s) on the node kept running (a cordon evicts nothing).",
            f"{o.pods_before - o.pods_during} pod(s) left the node while it was cordoned.",
        ),
        check(
            "room",
            "The pool's jobs find room or say why they wait",
            waiting <= 0 or o.spare_nodes > 0,
            f"{max(0, waiting)} more pod(s) waited; {o.spare_nodes} spare node(s) in the pool.",
            f"{waiting} more GPU pod(s) stayed Pending and the pool had no spare node: it "
            "cannot lose a node without queueing.",
        ),
        check(
            "restored",
            "The node is restored",
            o.restored,
            f"{o.node} is schedulable again.",
            f"{o.node} is still cordoned: uncordon it (kubectl uncordon {o.node}).",
        ),
    ]
