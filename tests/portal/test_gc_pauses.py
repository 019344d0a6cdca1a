"""A garbage collection that pauses the process longer than the setting is logged, with its
generation; a shorter one is not, and 0 installs nothing."""

from __future__ import annotations

import gc
import logging

import pytest

from portal.gc_pauses import gc_pauses_log


@pytest.fixture
def callbacks():  # type: ignore[no-untyped-def]
    before = list(gc.callbacks)
    yield
    gc.callbacks[:] = before


def test_a_long_collection_is_logged_with_its_generation(callbacks, caplog) -> None:  # type: ignore[no-untyped-def]
    gc_pauses_log(1e-9)  # every collection is "long"
    gc_pauses_log(1e-9)  # installed once a process
    assert sum(getattr(c, "_portal", False) for c in gc.callbacks) == 1
    held = [[i] for i in range(200_000)]  # containers for the collector to walk
    with caplog.at_level(logging.WARNING, logger="portal.gc"):
        gc.collect(2)
    assert "garbage collection of generation 2 paused every thread for" in caplog.text
    assert held


def test_short_collections_and_zero_log_nothing(callbacks, caplog) -> None:  # type: ignore[no-untyped-def]
    gc_pauses_log(0)
    assert not any(getattr(c, "_portal", False) for c in gc.callbacks)
    gc_pauses_log(60.0)
    with caplog.at_level(logging.WARNING, logger="portal.gc"):
        gc.collect(0)
    assert "garbage collection" not in caplog.text
