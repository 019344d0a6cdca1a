"""What holds a pool's nodes over time, read from the database: the pool's shape now, the
bookings holding a window (approved or started) and the open loans from the pool. Three
queries, whatever the number of bookings."""

from __future__ import annotations

from datetime import datetime

from pools.core.bookings import Holding, PoolShape, Window
from pools.models import Booking, MoveItem, MoveRequest, Node, Pool
from pools.moves.rules import OPEN_LOAN_STATES


def pool_shape(pool: Pool) -> PoolShape:
    rows = Node.objects.present().filter(pool=pool).values_list("name", "gpu_model", "gpu_count")
    return PoolShape(pool.name, {name: (model, gpus) for name, model, gpus in rows}, pool.min_nodes)


def booking_holding(booking: Booking) -> Holding:
    nodes = booking.taken or booking.node_names
    return Holding(
        f"booking #{booking.pk}" if booking.pk else "this booking",
        Window(booking.starts_at, booking.ends_at),
        frozenset(nodes),
        "" if booking.taken else booking.gpu_model,
        0 if booking.taken else booking.gpus,
    )


def pool_holdings(
    pool: Pool, *, since: datetime, until: datetime, but: int | None = None
) -> list[Holding]:
    """Every booking and open loan holding some of the pool's nodes between `since` and
    `until`, but booking `but` (the one being checked) and the loans bookings started
    (counted as their booking)."""
    bookings = Booking.objects.filter(
        source=pool,
        state__in=Booking.HOLDING_STATES,
        starts_at__lt=until,
        ends_at__gt=since,
    ).exclude(pk=but)
    held = [booking_holding(b) for b in bookings]
    loans = (
        MoveItem.objects.filter(
            source_pool=pool,
            request__loan_until__gt=since,
            request__loan_return_requested_at__isnull=True,
            request__state__in=OPEN_LOAN_STATES,
            request__booking__isnull=True,
        )
        .exclude(request__state=MoveRequest.State.PENDING)
        .values_list("request_id", "request__loan_until", "node__name")
    )
    by_loan: dict[tuple[int, datetime], set[str]] = {}
    for request_id, loan_until, node in loans:
        by_loan.setdefault((request_id, loan_until), set()).add(node)
    for (request_id, loan_until), nodes in sorted(by_loan.items()):
        held.append(
            Holding(
                f"the loan of move #{request_id}",
                Window(since, loan_until),
                frozenset(nodes),
                lent=True,
            )
        )
    return held
