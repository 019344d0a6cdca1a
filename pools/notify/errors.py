"""The one error the notification channels raise: NotificationFailed, transient or not."""

from __future__ import annotations


class NotificationFailed(Exception):
    """A notification that did not go out. `transient`: a later try may succeed (a timeout,
    a refused connection, a 5xx or a 429); otherwise retrying cannot help (a 4xx, a
    recipient the server refuses)."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient
