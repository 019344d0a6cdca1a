"""Each present node's pool, in Prometheus's text format, for the recording rules that add
up every pool's figures (pools.core.pool_sums): one series a node and the membership's
digest beside it, read in one query so that the two agree."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pools.core.pool_sums import (
    DIGEST_LABEL,
    MEMBERSHIP,
    MEMBERSHIP_DIGEST,
    NODE_LABEL,
    POOL_LABEL,
    membership_digest,
)
from pools.models import Node


def membership() -> list[tuple[str, str | None]]:
    """(node, pool name or None) for every present node of the current cluster."""
    return list(Node.objects.present().values_list("name", "pool__name"))


class _Membership(Collector):
    def __init__(self, members: list[tuple[str, str | None]]) -> None:
        self.members = members

    def collect(self) -> Iterator[GaugeMetricFamily]:
        nodes = GaugeMetricFamily(
            MEMBERSHIP,
            "1 for each present GPU node, with its pool (none: no pool)",
            labels=[NODE_LABEL, POOL_LABEL],
        )
        for node, pool in self.members:
            # An empty label is no label to Prometheus: the unassigned nodes group apart.
            nodes.add_metric([node, pool or ""], 1)
        yield nodes
        # In the same page, so that a rule reading both sees one scrape's membership.
        digest = GaugeMetricFamily(
            MEMBERSHIP_DIGEST,
            "1, with a digest of every present node's pool as the portal computes it",
            labels=[DIGEST_LABEL],
        )
        digest.add_metric([membership_digest(self.members)], 1)
        yield digest


def membership_text() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Membership(membership()))
    return generate_latest(registry)
