"""Reading a paged list one page ahead of the caller.

A full listing of a large cluster alternates between waiting for the API server to send a
page and turning that page into rows; with the reading (the request, the transfer and the
JSON decoding) in a thread of its own, the server prepares and sends the next page while
the caller works on this one. The socket waits release the GIL, so on two cores the two
sides overlap instead of taking turns.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar, cast

T = TypeVar("T")
_POLL = 0.1  # how often a blocked reader checks that the caller still wants pages


def read_ahead(pages: Iterator[T], depth: int = 1) -> Iterator[T]:
    """The items of `pages`, read in a thread of their own at most `depth` ahead. An error
    raised while reading is raised here, in the caller's thread, after the items read
    before it; a caller that stops early stops the reading at the next item."""
    waiting: queue.Queue[tuple[bool, T | None, Exception | None]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def hand_over(item: tuple[bool, T | None, Exception | None]) -> bool:
        while not stop.is_set():
            try:
                waiting.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for page in pages:
                if not hand_over((False, page, None)):
                    return
        except Exception as exc:  # noqa: BLE001 -- raised again in the caller's thread
            hand_over((True, None, exc))
            return
        hand_over((True, None, None))

    threading.Thread(target=read, daemon=True, name="read-ahead").start()
    try:
        while True:
            finished, page, error = waiting.get()
            if error is not None:
                raise error
            if finished:
                return
            yield cast(T, page)
    finally:
        stop.set()
