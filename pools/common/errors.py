"""The domain's refusals, in one module that imports nothing of the domain's own.

A refused workflow step carries a stable `code` for programs, a `message` for people, the
`fields` it concerns and the HTTP `status` the API answers with; pages show the message.
A node that execution gives up on raises a `NodeNotMoved`: the item is recorded as failed
with its message and nothing is patched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pools.core.checks import CheckFailure


class Refused(Exception):
    """A refused step; `code` is stable for the API, the message is for people."""

    status = 409

    def __init__(self, code: str, message: str, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fields = fields or {}


class MoveRefused(Refused):
    """The checks failed: nothing was created."""

    def __init__(self, failures: Sequence[CheckFailure]) -> None:
        first = failures[0]
        super().__init__(
            first.code,
            " ".join(f.message for f in failures),
            {"checks": [f.as_dict() for f in failures]},
        )
        self.failures = list(failures)


class InvalidMove(Refused):
    """Bad input: `fields` names each field and why."""

    status = 400


class InvalidInput(Refused):
    """Bad input outside the move workflow (a dismissal, a drill): `fields` says why."""

    status = 400


class NotAllowed(Refused):
    """The user's role, or the four-eyes rule, does not allow the step."""

    status = 403


class NodeNotMoved(Exception):
    """Execution gives up on one node before patching it; the message goes on its item."""


class NodeMovedSinceRequest(NodeNotMoved):
    """The node's pool label is no longer the one the request was made from."""


class CapacityFloorReached(NodeNotMoved):
    """Taking the node now would leave its source pool below its minimum."""


class DrainDeadlinePassed(NodeNotMoved):
    """Drain-first: GPU pods were still on the node when the deadline came."""


class ReconfigurationFailed(NodeNotMoved):
    """The MIG manager said the new layout failed, or did not finish in time: the node was
    relabelled and stays cordoned, for an operator to look at."""


class MetricsUnavailable(Refused):
    """An answer that needs the DCGM metrics (a health filter) while Prometheus cannot give
    them: refused, not answered as if no node matched."""

    status = 503

    def __init__(self, reason: str) -> None:
        super().__init__(
            "metrics_unavailable",
            f"This filter needs the DCGM metrics, which are unavailable: {reason}.",
        )
