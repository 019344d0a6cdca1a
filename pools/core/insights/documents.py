"""The insights as plain documents (pure): what the API answers, the same fields a page
shows. Times become ISO 8601 strings in UTC, durations stay seconds."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pools.core.insights.advisor import Advice
from pools.core.insights.failures import FailureReport
from pools.core.insights.indicators import PoolInsights, WindowMembers
from pools.core.insights.profiles import Profile
from pools.core.insights.queueing import QueueReport
from pools.core.insights.readiness import Check
from pools.core.insights.records import Window
from pools.core.insights.replacement import ReplacementReport
from pools.core.insights.utilisation import UtilisationReport


def iso(at: float | None) -> str | None:
    return datetime.fromtimestamp(at, UTC).isoformat() if at is not None else None


def utilisation_document(u: UtilisationReport) -> dict[str, Any]:
    return {
        "target": u.target,
        "average": u.average,
        "p95": u.p95,
        "samples": u.samples,
        "below_target": u.below_target,
        "spiky": u.spiky,
        "idle_node_share": u.idle_node_share,
        "idle_nodes_mean": u.idle_nodes_mean,
        "gaps_seconds": u.gaps.as_dict(),
        "clear_gaps": u.clear_gaps,
        "busy_share": u.busy_share,
        "empty_node_share": u.empty_node_share,
        "allocated_share": u.allocated_share,
        "metrics_error": u.metrics_error,
    }


def queue_document(q: QueueReport) -> dict[str, Any]:
    return {
        "waits_seconds": q.waits.as_dict(),
        "queued": q.queued,
        "still_pending": q.still_pending,
        "by_cause": {str(c): s.as_dict() for c, s in q.by_cause.items()},
        "first_half": q.first_half,
        "second_half": q.second_half,
        "growing": q.growing,
        "peak_waiting_gpus": q.peak_waiting_gpus,
    }


def failures_document(f: FailureReport) -> dict[str, Any]:
    return {
        "total": f.total,
        "pods": f.pods,
        "main_cause": str(f.main_cause) if f.main_cause else None,
        "counts": {str(c): n for c, n in f.counts.items()},
        "trend": [
            {"start": iso(start), "counts": {str(c): n for c, n in counts.items()}}
            for start, counts in f.trend
        ],
        "examples": {
            str(c): [
                {
                    "pod": e.pod,
                    "node": e.node,
                    "reason": e.reason,
                    "message": e.message,
                    "at": iso(e.at),
                }
                for e in found
            ]
            for c, found in f.examples.items()
        },
    }


def replacement_document(r: ReplacementReport) -> dict[str, Any]:
    return {
        "nodes": r.nodes,
        "score": r.score,
        "hand_score": r.hand_score,
        "level": r.level,
        "dimensions": [
            {"name": d.name, "values": dict(d.values), "odd": d.odd, "mixed": d.mixed}
            for d in r.dimensions
        ],
        "odd_nodes": {node: list(what) for node, what in r.odd_nodes.items()},
    }


def check_document(c: Check) -> dict[str, Any]:
    return {
        "name": c.name,
        "title": c.title,
        "status": str(c.status),
        "detail": c.detail,
        "concerned": list(c.concerned),
    }


def window_document(w: Window) -> dict[str, Any]:
    return {"days": w.days, "start": iso(w.start), "end": iso(w.end)}


def insights_document(p: PoolInsights, checks: Sequence[Check]) -> dict[str, Any]:
    return {
        "pool": p.pool.name,
        "window": window_document(p.window),
        "utilisation": utilisation_document(p.utilisation),
        "queue": queue_document(p.queue),
        "failures": failures_document(p.failures),
        "replacement": replacement_document(p.replacement),
        "members": members_document(p.members),
        "readiness": [check_document(c) for c in checks],
    }


def members_document(m: WindowMembers) -> dict[str, Any]:
    return {
        "nodes": m.nodes,
        "changes": [
            {"node": c.node, "joined": iso(c.joined), "left": iso(c.left)} for c in m.changes
        ],
        "assumed_before": iso(m.assumed_before),
    }


def advice_document(a: Advice) -> dict[str, Any]:
    move = a.move
    return {
        "key": a.key,
        "rule": str(a.rule),
        "pools": list(a.pools),
        "title": a.title,
        "evidence": list(a.evidence),
        "confidence": a.confidence,
        "confidence_level": a.confidence_level,
        "fingerprint": a.fingerprint,
        "move": None
        if move is None
        else {
            "source": move.source,
            "destination": move.destination,
            "nodes": list(move.nodes),
            "loan_days": move.loan_days,
            "reason": move.reason(),
            "busy_nodes": move.busy,
            "free_gpus": move.free_gpus,
            "would_start": list(move.would_start),
            "refusals": list(move.refusals),
        },
    }


def profile_document(p: Profile) -> dict[str, Any]:
    return {
        "owner": p.owner,
        "workload_type": p.workload_type,
        "pods": p.pods,
        "gpus_per_pod": p.gpus_per_pod.as_dict(),
        "framebuffer_mib": None
        if p.framebuffer_mib is None
        else {"min": p.framebuffer_mib[0], "max": p.framebuffer_mib[1]},
        "cpu_milli": p.cpu_milli.as_dict(),
        "memory_bytes": p.memory_bytes.as_dict(),
        "run_seconds": p.run_seconds.as_dict(),
        "concurrency_peak": p.concurrency_peak,
        "concurrency_typical": p.concurrency_typical,
        "restarts": p.restarts,
        "failures": {str(c): n for c, n in p.failures.items()},
    }
