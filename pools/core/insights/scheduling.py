"""What a pod's scheduling block says about pools (pure), read with the fit check's own
reader so the insights and the fit check agree on what a selector or toleration means."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pools.core.fit.fields import FieldReader
from pools.core.fit.scheduling import (
    NodePlacement,
    Toleration,
    read_placement,
    read_tolerations,
    tolerated,
)
from pools.core.taints import Taint


@dataclass(frozen=True)
class PodScheduling:
    placement: NodePlacement
    tolerations: tuple[Toleration, ...]

    def wanted_pools(self, pool_key: str) -> frozenset[str] | None:
        """The pools a node must be in for this pod (None: any node will do)."""
        return self.placement.requires_value(pool_key)

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        return tolerated(self.tolerations, Taint(key, value, effect))


def pod_scheduling(
    node_selector: Mapping[str, Any] | None,
    affinity: Mapping[str, Any] | None,
    tolerations: Sequence[Any] | None,
) -> PodScheduling:
    spec = {
        "nodeSelector": node_selector or None,
        "affinity": affinity or None,
        "tolerations": list(tolerations or []) or None,
    }
    reader, findings = FieldReader(), []  # type: ignore[var-annotated]
    return PodScheduling(
        read_placement(reader, spec, "spec", findings),
        read_tolerations(reader, spec, "spec", findings),
    )


def wanted_pool(
    node_selector: Mapping[str, Any] | None, affinity: Mapping[str, Any] | None, pool_key: str
) -> str:
    """The one pool a pending pod asks for ('' : none, or several)."""
    pools = pod_scheduling(node_selector, affinity, None).wanted_pools(pool_key)
    return next(iter(pools)) if pools is not None and len(pools) == 1 else ""
