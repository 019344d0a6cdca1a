"""MIG partitions as the NVIDIA GPU operator's `all-<profile>` configurations make them.

With the `single` strategy every GPU of the node is split into equal GPU instances, the
device plugin advertises each instance as one `nvidia.com/gpu`, and GPU feature discovery
labels the node with the instance's product and memory. dcgm-exporter reports each
instance as its own series, labelled `GPU_I_PROFILE` and `GPU_I_ID`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# GPU instance IDs of an A100/H100 split into equal instances of a size (in slices), as
# `nvidia-smi mig -lgi` lists them.
_INSTANCE_IDS: dict[int, tuple[int, ...]] = {
    1: (7, 8, 9, 10, 11, 12, 13),
    2: (3, 4, 5),
    3: (1, 2),
    4: (1,),
    7: (0,),
}
PROFILE_RE = re.compile(r"^(?P<slices>[1-7])g\.(?P<gb>[0-9]+)gb$")
STRATEGY_LABEL = "nvidia.com/mig.strategy"
CONFIG_LABEL = "nvidia.com/mig.config"
PRODUCT_LABEL = "nvidia.com/gpu.product"


@dataclass(frozen=True)
class MigLayout:
    profile: str  # e.g. 1g.10gb

    @property
    def instance_ids(self) -> tuple[int, ...]:
        return _INSTANCE_IDS[int(self.profile[0])]

    @property
    def per_gpu(self) -> int:
        return len(self.instance_ids)

    @property
    def memory_mib(self) -> int:
        match = PROFILE_RE.match(self.profile)
        assert match is not None
        # An instance's usable framebuffer is a little under its nominal size.
        return int(match["gb"]) * 1024 * 95 // 100


def profile_problem(profile: str) -> str | None:
    match = PROFILE_RE.match(profile)
    if not match or int(match["slices"]) not in _INSTANCE_IDS:
        sizes = ", ".join(f"{s}g" for s in _INSTANCE_IDS)
        return f"MIG profile must look like 1g.10gb with a size of {sizes}, got {profile!r}"
    return None


def node_labels(model: str, gpus: int, layout: MigLayout) -> dict[str, str]:
    """What GPU feature discovery labels a node with under the single strategy."""
    return {
        STRATEGY_LABEL: "single",
        CONFIG_LABEL: f"all-{layout.profile}",
        PRODUCT_LABEL: f"{model}-MIG-{layout.profile}",
        "nvidia.com/gpu.count": str(gpus * layout.per_gpu),
        "nvidia.com/gpu.memory": str(layout.memory_mib),
        "nvidia.com/gpu.slices.gi": layout.profile[0],
        "nvidia.com/gpu.slices.ci": layout.profile[0],
    }


def layout_of(labels: dict[str, str]) -> MigLayout | None:
    """The node's MIG layout, read back from its labels (None: whole GPUs)."""
    if labels.get(STRATEGY_LABEL) != "single":
        return None
    config = labels.get(CONFIG_LABEL, "")
    profile = config.removeprefix("all-")
    return MigLayout(profile) if profile_problem(profile) is None else None


def parent_model(product: str) -> str:
    return product.split("-MIG-", 1)[0]
