"""The sliding-window arithmetic of the API's rate limit (pools.core.rate_window)."""

from __future__ import annotations

import random

import pytest

from pools.core.rate_window import allowed, estimate, retry_after, window_at


def test_a_window_is_its_index_and_how_much_of_it_has_gone() -> None:
    assert window_at(120.0, 60) == (2, 0.0)
    index, elapsed = window_at(150.0, 60)
    assert index == 2 and elapsed == pytest.approx(0.5)


def test_the_previous_window_weighs_what_of_it_lies_within_the_last_period() -> None:
    assert estimate(3, 10, 0.0) == 13  # the whole previous window is within the period
    assert estimate(3, 10, 0.75) == pytest.approx(5.5)
    assert allowed(5, 10, 0.5, 10) and not allowed(6, 10, 0.5, 10)


def test_a_steady_client_gets_its_limit_each_period_and_not_one_more() -> None:
    limit, period, now = 60, 60.0, 6000.0
    counts: dict[int, int] = {}
    served: list[float] = []
    for step in range(1200):  # two requests a second for ten minutes: twice the limit
        at = now + step / 2
        index, elapsed = window_at(at, period)
        counts[index] = counts.get(index, 0) + 1
        if allowed(counts[index], counts.get(index - 1, 0), elapsed, limit):
            served.append(at)
        else:
            counts[index] -= 1  # a refused request takes no place
    busiest = max(sum(1 for t in served if start <= t < start + period) for start in served)
    assert busiest == limit
    assert len(served) >= 10 * limit * 0.95


def allowed_after(
    seconds: float, limit: int, counted: int, previous: int, elapsed: float, period: float
) -> bool:
    """Whether one more request is let in `seconds` from now, nobody else asking."""
    later = elapsed + seconds / period
    if later < 1:  # still this window
        return allowed(counted + 1, previous, later, limit)
    if later < 2:  # the next: this window's count is the previous one
        return allowed(1, counted, later - 1, limit)
    return allowed(1, 0, later - 2, limit)


@pytest.mark.parametrize("seed", range(5))
def test_retry_after_is_the_first_moment_a_request_is_let_in_again(seed: int) -> None:
    """After the wait a request is allowed; a little before it, not yet."""
    chance = random.Random(seed)  # noqa: S311 -- reproducible cases, not secrets
    period = 60.0
    checked = 0
    while checked < 200:
        limit = chance.randint(1, 50)
        counted = chance.randint(0, limit)
        previous = chance.randint(0, 2 * limit)
        elapsed = chance.random()
        if allowed(counted + 1, previous, elapsed, limit):
            continue  # not refused: nothing to wait for
        wait = retry_after(counted, previous, elapsed, limit, period)

        state = (limit, counted, previous, elapsed)
        assert allowed_after(wait + 1e-6, *state, period), (state, wait)
        assert wait < 1e-3 or not allowed_after(wait - 1e-3, *state, period), (state, wait)
        checked += 1
