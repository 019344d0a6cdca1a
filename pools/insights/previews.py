"""The advisor's suggested moves checked by the move's own preview, the one a person sees
before asking: which pending pods the move would let start on the suggested nodes, and why
the request would be refused now (a capacity floor, a node's health, a node already
moving). A suggestion is never more sure than the request it prefills."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from pools.core.insights.advisor import Advice, MoveSuggestion
from pools.core.wording import counted
from pools.models import Pool
from pools.moves.impact import move_impact
from pools.moves.plan import MoveAsk, move_plan

# How many of the pods that would start the evidence names.
NAMED_PODS = 5


def _ask(move: MoveSuggestion, destination: Pool, now: datetime) -> MoveAsk:
    loan_until = now + timedelta(days=move.loan_days) if move.loan_days else None
    return MoveAsk(
        node_names=move.nodes, destination=destination, reason=move.reason(), loan_until=loan_until
    )


def _said(would_start: Sequence[str], refusals: Sequence[str]) -> list[str]:
    if would_start:
        named = ", ".join(would_start[:NAMED_PODS])
        more = f" and {len(would_start) - NAMED_PODS} more" if len(would_start) > NAMED_PODS else ""
        lines = [
            f"The move's preview: {counted(len(would_start), 'pending pod')} would start on "
            f"these nodes ({named}{more})."
        ]
    else:
        lines = [
            "The move's preview: no pod pending now would start on these nodes (the queue "
            "above is the window's; the loan is for the next one)."
        ]
    if refusals:
        lines.append("The request would be refused now: " + "; ".join(refusals))
    return lines


def previewed(advice: Sequence[Advice], *, now: datetime) -> list[Advice]:
    """Each suggestion with a move, with what the move's preview says of it (the pods it
    would let start, the refusals); a refused one loses half its confidence."""
    if not any(item.move for item in advice):
        return list(advice)
    pools = {p.name: p for p in Pool.objects.active()}
    found = []
    for item in advice:
        move = item.move
        if move is None or move.destination not in pools:
            found.append(item)
            continue
        ask = _ask(move, pools[move.destination], now)
        plan = move_plan(ask=ask, now=now)
        impact = move_impact(plan, drain_policy=ask.drain_policy)
        refusals = tuple(f.message for f in plan.failures)
        found.append(
            replace(
                item,
                evidence=[*item.evidence, *_said(impact.would_start, refusals)],
                confidence=round(item.confidence * (0.5 if refusals else 1.0), 2),
                move=replace(
                    move,
                    would_start=tuple(impact.would_start),
                    refusals=refusals,
                    previewed=True,
                ),
            )
        )
    return found
