"""A node taint, one type for the whole portal (pure): what a pool puts on its nodes, what a
move writes, and what the fit check matches tolerations against.

Equality and hashing are the taint's identity in Kubernetes, key, value and effect:
`timeAdded` is kept as read but not compared, because a PATCH rewrites the whole list and the
node lifecycle controller's taints (node.kubernetes.io/*) must go back unchanged — a NoExecute
taint's timeAdded is when its pods' tolerationSeconds started counting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)


@dataclass(frozen=True, order=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE
    time_added: str = field(default="", compare=False, repr=False)

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Taint:
        return cls(
            str(raw.get("key") or ""),
            str(raw.get("value") or ""),
            str(raw.get("effect") or ""),
            str(raw.get("timeAdded") or ""),
        )

    def to_api(self) -> dict[str, str]:
        body = {"key": self.key, "effect": self.effect}
        if self.value:
            body["value"] = self.value
        if self.time_added:
            body["timeAdded"] = self.time_added
        return body

    @property
    def blocks_scheduling(self) -> bool:
        return self.effect in (NO_SCHEDULE, NO_EXECUTE)

    def braces(self) -> str:
        """How the scheduler names the taint: `{workload-training: true}`."""
        return f"{{{self.key}: {self.value}}}"

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )
