"""The advisor (pure): suggestions grounded in the pools' indicators and the practice's rules
of thumb, each with its evidence and a confidence. A suggestion that moves nodes carries the
move to ask for (as a loan first); the request still needs someone else's approval.

Each suggestion has a stable key (its rule and the pools concerned) and a fingerprint of
its evidence, coarse enough that the same situation gives the same fingerprint: a dismissal
holds while the fingerprint is unchanged."""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pools.core.insights.failures import CAUSE_TITLES, Cause, cause_breakdown
from pools.core.insights.indicators import PoolInsights
from pools.core.insights.queueing import QueueCause
from pools.core.insights.replacement import DIMENSION_TITLES, HIGH_SCORE
from pools.core.wording import counted

# Rules of thumb, as numbers.
MIN_QUEUED = 3  # restricted-queue pods before a pool is said to be short
# ...and the share of its GPU pods they are: a pool whose jobs wait now and then, minutes
# each, while a neighbour has room is busy, not short ("jobs that often wait").
OFTEN_QUEUED_SHARE = 0.05
LONG_WAIT_SECONDS = 600.0
IDLE_SHARE = 0.5  # share of the time with an idle whole node
SMALL_POOL_NODES = 2
MIN_FAILURES = 3
GPU_FAULT_SHARE = 0.5
LOAN_DAYS = 7


class Rule(enum.StrEnum):
    LEND = "lend"
    SPLIT = "split"
    KEEP_SHARED = "keep_shared"
    AUTOMATE = "automate"
    GPU_FAULTS = "gpu_faults"
    SEND_ELSEWHERE = "send_elsewhere"  # to another cluster (pools.core.insights.elsewhere)


@dataclass(frozen=True)
class MoveSuggestion:
    source: str
    destination: str
    nodes: tuple[str, ...]
    loan_days: int | None  # None: a permanent move
    busy: int = 0  # of the nodes, those running pods now (they keep running)
    free_gpus: int = 0  # GPUs free now on the nodes together
    # What the move's own preview says (filled by the domain, pools.insights.gather): the
    # pending pods the move would let start, and why the request would be refused now.
    would_start: tuple[str, ...] = ()
    refusals: tuple[str, ...] = ()
    previewed: bool = False

    def reason(self) -> str:
        kind = f"loan for {self.loan_days} days" if self.loan_days else "move"
        idle = len(self.nodes) - self.busy
        what = counted(len(self.nodes), "idle node" if not self.busy else "node")
        if self.busy and idle:
            what += f" ({idle} idle)"
        return f"Advisor: {kind} of {what} from {self.source}"


@dataclass(frozen=True)
class Advice:
    rule: Rule
    pools: tuple[str, ...]
    title: str
    evidence: list[str]
    confidence: float  # 0..1
    fingerprint: str
    move: MoveSuggestion | None = None

    @property
    def key(self) -> str:
        return f"{self.rule}:{'+'.join(self.pools)}"

    @property
    def confidence_level(self) -> str:
        return "high" if self.confidence >= 0.7 else "medium" if self.confidence >= 0.4 else "low"


def fingerprint_of(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def magnitude(n: float) -> int:
    """A coarse bucket (doubling): 3 and 3.5 are the same evidence, 3 and 7 are not."""
    return int(n).bit_length()


def _coverage(p: PoolInsights) -> float:
    """How much of the window the utilisation figures cover (one sample an hour expected)."""
    expected = max(1.0, p.window.seconds / 3600)
    return min(1.0, p.utilisation.samples / expected)


def _short(p: PoolInsights) -> bool:
    """Its GPU pods often wait, typically long, while another pool has room. (Whether the
    queue grows is evidence, not a condition: a history shorter than the window has an
    empty first half.)"""
    q = p.queue
    restricted = q.by_cause.get(QueueCause.RESTRICTED)
    long_wait = restricted is not None and (restricted.p50 or 0.0) >= LONG_WAIT_SECONDS
    count = q.count(QueueCause.RESTRICTED)
    often = count >= OFTEN_QUEUED_SHARE * q.waits.count
    return count >= MIN_QUEUED and often and long_wait


def under_used(p: PoolInsights) -> bool:
    """Under-used: below its target (measured, else by allocation), with GPUs free now on
    nodes that could move: a whole node idle, or free GPUs in pieces across busy nodes (a
    pool at 10 % with every node running one small job lends as well as an empty one)."""
    u = p.utilisation
    return u.level < u.target and p.pool.free_now > 0


def _donor_order(p: PoolInsights) -> tuple[bool, float, int]:
    """Donors with whole idle nodes first, then the longest idle, then the most free GPUs."""
    return (not p.pool.lendable, -p.utilisation.idle_share, -p.pool.free_now)


def _chosen(receiver: PoolInsights, donor: PoolInsights) -> list[tuple[str, int, int]]:
    """The donor's nodes to lend, (name, free GPUs, allocated): the emptiest first, until
    their free GPUs cover the most GPUs that waited at once, within the donor's floor."""
    spare = max(0, donor.pool.nodes - donor.pool.min_nodes)
    fitting = sorted(
        (allocated, -gpus, name)
        for name, model, gpus, allocated in donor.pool.candidates
        if receiver.pool.accepts(model) and gpus > allocated
    )
    wanted = max(1, receiver.queue.peak_waiting_gpus)
    chosen: list[tuple[str, int, int]] = []
    free = 0
    for allocated, minus_gpus, name in fitting[:spare]:
        if free >= wanted:
            break
        chosen.append((name, -minus_gpus - allocated, allocated))
        free += -minus_gpus - allocated
    return chosen


def _donor_evidence(donor: PoolInsights) -> str:
    u = donor.utilisation
    if u.average is not None:
        level = f"utilisation {u.average:.0f}% on average (p95 {u.p95 or 0:.0f}%)"
        idle = "a whole node idle"
    else:
        level = f"GPUs allocated {u.level:.0f}% of the time (no utilisation figures)"
        idle = "a node running no job"
    return (
        f"{donor.pool.name}: {level} against a target of {u.target:.0f}%; {idle} "
        f"{100 * u.idle_share:.0f}% of the time; "
        f"{counted(len(donor.pool.lendable), 'node')} idle now, "
        f"{counted(donor.pool.free_now, 'GPU')} free now on the nodes that could move."
    )


def _lend(receiver: PoolInsights, donor: PoolInsights) -> Advice | None:
    chosen = _chosen(receiver, donor)
    if not chosen:
        return None
    nodes = tuple(sorted(name for name, _, _ in chosen))
    busy = sum(1 for _, _, allocated in chosen if allocated)
    free = sum(free for _, free, _ in chosen)
    q, u = receiver.queue, donor.utilisation
    restricted = q.by_cause[QueueCause.RESTRICTED]
    evidence = [
        f"{receiver.pool.name}: {counted(restricted.count, 'GPU pod')} waited while another "
        f"pool had room (p90 {(restricted.p90 or 0) / 60:.0f} min); queued pods "
        f"{q.first_half} then {q.second_half} in the two halves of the history; at peak "
        f"{counted(q.peak_waiting_gpus, 'GPU')} waited.",
        _donor_evidence(donor),
    ]
    if busy:
        evidence.append(
            f"{busy} of the {len(nodes)} nodes run pods now: lent as they are "
            f"(the pods keep running), {counted(free, 'GPU')} free on the nodes together."
        )
    strength = min(1.0, restricted.count / (3 * MIN_QUEUED)) * 0.5 + u.idle_share * 0.3
    if busy:
        strength *= 1 - 0.5 * busy / len(nodes)  # room in pieces: less sure it serves
    return Advice(
        rule=Rule.LEND,
        pools=(donor.pool.name, receiver.pool.name),
        title=f"Lend {counted(len(nodes), 'node')} from {donor.pool.name} to {receiver.pool.name}",
        evidence=evidence,
        confidence=round(strength + 0.2 * _coverage(donor), 2),
        fingerprint=fingerprint_of(len(nodes), magnitude(restricted.count)),
        move=MoveSuggestion(
            donor.pool.name, receiver.pool.name, nodes, LOAN_DAYS, busy=busy, free_gpus=free
        ),
    )


def lend_advice(pools: Sequence[PoolInsights]) -> list[Advice]:
    """Lend (a loan first) idle nodes of an under-used pool to one whose pods wait because
    their node selection keeps them out of the idle nodes."""
    donors = sorted((p for p in pools if under_used(p)), key=_donor_order)
    found = []
    for receiver in pools:
        if not _short(receiver):
            continue
        for donor in donors:
            if donor.pool.name != receiver.pool.name and (advice := _lend(receiver, donor)):
                found.append(advice)
                break
    return found


def split_advice(p: PoolInsights) -> Advice | None:
    r = p.replacement
    mixed = {
        name: {v: c for v, c in dim.values.items() if v}
        for name in r.mixes_models_or_drivers
        if (dim := r.dimension(name)) is not None
    }
    if not mixed:
        return None
    evidence = [
        f"{DIMENSION_TITLES[name]}s: "
        + ", ".join(f"{v} on {counted(c, 'node')}" for v, c in sorted(values.items()))
        for name, values in mixed.items()
    ]
    minority = min(min(values.values()) for values in mixed.values()) / max(1, r.nodes)
    kinds = " and ".join(DIMENSION_TITLES[m] + "s" for m in mixed)
    return Advice(
        rule=Rule.SPLIT,
        pools=(p.pool.name,),
        title=f"Split {p.pool.name}: it mixes {kinds}",
        evidence=[
            *evidence,
            "Jobs pinned to one model or driver cannot use the other nodes, and capacity "
            "moves between pools only when node specs match: one pool per model and driver.",
        ],
        confidence=round(min(1.0, 0.5 + minority), 2),
        fingerprint=fingerprint_of(sorted((n, sorted(v)) for n, v in mixed.items())),
    )


def keep_shared_advice(p: PoolInsights) -> Advice | None:
    u = p.utilisation
    small = 1 <= p.pool.nodes <= SMALL_POOL_NODES
    if not p.pool.dedicated or not (small or u.spiky):
        return None
    evidence = []
    if small:
        evidence.append(f"{p.pool.name} has {counted(p.pool.nodes, 'node')}: too few to dedicate.")
    if u.spiky:
        evidence.append(
            f"Utilisation peaks at {u.p95:.0f}% (p95) over an average of {u.average:.0f}%: "
            "dedicated nodes would sit idle between the peaks."
        )
    return Advice(
        rule=Rule.KEEP_SHARED,
        pools=(p.pool.name,),
        title=f"Keep {p.pool.name} shared rather than dedicated",
        evidence=evidence,
        confidence=round(0.4 + 0.3 * small + 0.3 * u.spiky * _coverage(p), 2),
        fingerprint=fingerprint_of(small, u.spiky),
    )


def automate_advice(p: PoolInsights) -> Advice | None:
    r = p.replacement
    if r.hand_score < HIGH_SCORE:
        return None
    odd = [f"{node}: {'; '.join(what)}" for node, what in list(r.odd_nodes.items())[:10]]
    return Advice(
        rule=Rule.AUTOMATE,
        pools=(p.pool.name,),
        title=f"Stop adding nodes to {p.pool.name} until their set-up is automated",
        evidence=[
            f"Replacement difficulty {r.score}/100 ({r.hand_score} from hand configuration, "
            f"versions and images): {len(r.odd_nodes)} of {counted(r.nodes, 'node')} differ.",
            *odd,
        ],
        confidence=round(min(1.0, r.hand_score / 50), 2),
        fingerprint=fingerprint_of(sorted(r.odd_nodes)),
    )


def gpu_fault_advice(p: PoolInsights) -> Advice | None:
    f = p.failures
    faults = f.counts.get(Cause.GPU_FAULT, 0)
    if f.total < MIN_FAILURES or f.share(Cause.GPU_FAULT) < GPU_FAULT_SHARE:
        return None
    nodes = sorted({e.node for e in f.examples.get(Cause.GPU_FAULT, []) if e.node})
    return Advice(
        rule=Rule.GPU_FAULTS,
        pools=(p.pool.name,),
        title=f"Investigate the GPUs of {p.pool.name}: most failures are GPU or driver faults",
        evidence=[
            f"{faults} of {counted(f.total, 'failure')} are {CAUSE_TITLES[Cause.GPU_FAULT]}s "
            f"(XID errors while the pod ran, CUDA, driver or device-plugin errors), not sharing.",
            f"Failures by cause: {cause_breakdown(f.counts)}.",
            f"Nodes in the latest examples: {', '.join(nodes) or 'none recorded'}.",
        ],
        confidence=round(min(1.0, f.share(Cause.GPU_FAULT) * min(1.0, faults / 10) + 0.3), 2),
        fingerprint=fingerprint_of(magnitude(faults), nodes),
    )


def advise(pools: Sequence[PoolInsights]) -> list[Advice]:
    """Every suggestion for these pools, the most confident first."""
    found = lend_advice(pools)
    for p in pools:
        for rule in (split_advice, keep_shared_advice, automate_advice, gpu_fault_advice):
            if (advice := rule(p)) is not None:
                found.append(advice)
    return sorted(found, key=lambda a: (-a.confidence, a.key))


def visible(advice: Sequence[Advice], dismissed: Mapping[str, str]) -> list[Advice]:
    """The suggestions not dismissed: `dismissed` maps a key to the fingerprint of the
    evidence it was dismissed on; new evidence brings the suggestion back."""
    return [a for a in advice if dismissed.get(a.key) != a.fingerprint]
