"""Fault injection: latency, error answers, dropped connections, a concurrent writer, and
MIG reconfigurations that fail."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FailRule:
    status: int | str  # an HTTP code, or "drop" to close the connection without an answer
    count: int
    verb: str | None = None
    resource: str | None = None

    def matches(self, verb: str, resource: str) -> bool:
        return (self.verb in (None, verb)) and (self.resource in (None, resource))


@dataclass
class Faults:
    latency_ms: float = 0.0
    rates: dict[str, float] = field(default_factory=dict)  # "429"/"500"/"503"/"drop" -> share
    fail_next: list[FailRule] = field(default_factory=list)
    # node name -> how many of the next writes to it meet a concurrent writer first
    conflicts: dict[str, int] = field(default_factory=dict)
    # node name -> the Ready status its kubelet reports just before the next write to it
    ready_before_write: dict[str, str] = field(default_factory=dict)
    # node name -> how many of its next MIG reconfigurations fail (mig-manager's `failed`)
    mig_failures: dict[str, int] = field(default_factory=dict)
    seed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)  # noqa: S311 -- simulation, not security

    def configure(self, body: dict[str, Any]) -> None:
        with self.lock:
            if body.get("reset"):
                self.latency_ms = 0.0
                self.rates = {}
                self.fail_next = []
                self.conflicts = {}
                self.ready_before_write = {}
                self.mig_failures = {}
            if "latency_ms" in body:
                self.latency_ms = float(body["latency_ms"])
            if "rates" in body:
                self.rates = {str(k): float(v) for k, v in body["rates"].items()}
            for rule in body.get("fail_next", []):
                self.fail_next.append(
                    FailRule(
                        status=rule["status"] if rule["status"] == "drop" else int(rule["status"]),
                        count=int(rule.get("count", 1)),
                        verb=rule.get("verb"),
                        resource=rule.get("resource"),
                    )
                )
            for node, count in (body.get("conflicts") or {}).items():
                self.conflicts[node] = int(count)
            for node, status in (body.get("ready_before_write") or {}).items():
                self.ready_before_write[node] = str(status)
            for node, count in (body.get("mig_failures") or {}).items():
                self.mig_failures[node] = int(count)
            if "seed" in body:
                self.random.seed(int(body["seed"]))

    def describe(self) -> dict[str, Any]:
        with self.lock:
            return {
                "latency_ms": self.latency_ms,
                "rates": self.rates,
                "fail_next": [r.__dict__ for r in self.fail_next],
                "conflicts": self.conflicts,
                "ready_before_write": self.ready_before_write,
            }

    def decide(self, verb: str, resource: str) -> int | str | None:
        """What this request meets: None (served normally), an HTTP code, or "drop"."""
        with self.lock:
            for rule in self.fail_next:
                if rule.count > 0 and rule.matches(verb, resource):
                    rule.count -= 1
                    if rule.count == 0:
                        self.fail_next.remove(rule)
                    return rule.status
            for outcome, share in self.rates.items():
                if share > 0 and self.random.random() < share:
                    return outcome if outcome == "drop" else int(outcome)
        return None

    def take_ready_report(self, node: str) -> str | None:
        with self.lock:
            return self.ready_before_write.pop(node, None)

    def take_conflict(self, node: str) -> bool:
        with self.lock:
            remaining = self.conflicts.get(node, 0)
            if remaining <= 0:
                return False
            self.conflicts[node] = remaining - 1
            return True

    def fail_mig(self, node: str, count: int = 1) -> None:
        """The next `count` MIG reconfigurations of `node` fail."""
        with self.lock:
            self.mig_failures[node] = self.mig_failures.get(node, 0) + count

    def take_mig_failure(self, node: str) -> bool:
        with self.lock:
            remaining = self.mig_failures.get(node, 0)
            if remaining <= 0:
                return False
            self.mig_failures[node] = remaining - 1
            return True
