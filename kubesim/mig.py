"""MIG partitions as the NVIDIA GPU operator's `all-<profile>` configurations make them.

Every GPU of the node is split into equal GPU instances of one profile. What the node then
advertises depends on the device plugin's MIG strategy:

- `single`: each instance is one `nvidia.com/gpu`, and GPU feature discovery (GFD) labels
  the node with the instance's product (`<model>-MIG-<profile>`), count and memory;
- `mixed`: each instance is one `nvidia.com/mig-<profile>`, no `nvidia.com/gpu` is left,
  and GFD labels the node with the whole GPUs' product, count and memory, and each
  profile's own `nvidia.com/mig-<profile>.*` labels.

dcgm-exporter reports each instance as its own series, labelled `GPU_I_PROFILE` and
`GPU_I_ID`, whatever the strategy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
RESOURCE_PREFIX = "nvidia.com/mig-"  # the mixed strategy's nvidia.com/mig-1g.10gb
SINGLE, MIXED = "single", "mixed"
STRATEGIES = (SINGLE, MIXED)
DISABLED = "all-disabled"  # mig-manager's configuration with MIG mode off

STRATEGY_LABEL = "nvidia.com/mig.strategy"
CONFIG_LABEL = "nvidia.com/mig.config"
CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
CAPABLE_LABEL = "nvidia.com/mig.capable"
PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
MEMORY_LABEL = "nvidia.com/gpu.memory"

# GPU instance IDs of an A100/H100/H200 split into equal instances of a size (in slices),
# as `nvidia-smi mig -lgi` lists them.
_INSTANCE_IDS: dict[int, tuple[int, ...]] = {
    1: (7, 8, 9, 10, 11, 12, 13),
    2: (3, 4, 5),
    3: (1, 2),
    4: (1,),
    7: (0,),
}
# The profiles of each MIG-capable GPU (`nvidia-smi mig -lgip`), by the framebuffer in GB
# its product is named after: A100-40GB; A100-80GB and H100-80GB; H100 NVL; H200. The
# one-slice profiles with twice the memory (1g.20gb on an 80 GB GPU, four a GPU) are not
# simulated.
PROFILES: dict[int, tuple[str, ...]] = {
    40: ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    80: ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    94: ("1g.12gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    141: ("1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
}
MIG_CAPABLE_MODELS = ("A100", "H100", "H200")
PROFILE_RE = re.compile(r"^(?P<slices>[1-7])g\.(?P<gb>[0-9]+)gb$")
_MIXED_COUNT_RE = re.compile(r"^nvidia\.com/mig-(?P<profile>.+)\.count$")


@dataclass(frozen=True)
class MigLayout:
    profile: str  # e.g. 1g.10gb
    strategy: str = SINGLE

    @property
    def slices(self) -> int:
        return int(self.profile.split("g.", 1)[0])

    @property
    def instance_ids(self) -> tuple[int, ...]:
        return _INSTANCE_IDS[self.slices]

    @property
    def per_gpu(self) -> int:
        return len(self.instance_ids)

    @property
    def memory_mib(self) -> int:
        match = PROFILE_RE.match(self.profile)
        assert match is not None
        # An instance's usable framebuffer is a little under its nominal size.
        return int(match["gb"]) * 1024 * 95 // 100

    @property
    def config(self) -> str:
        """The mig-manager configuration that makes it (`nvidia.com/mig.config`)."""
        return f"all-{self.profile}"

    @property
    def resource(self) -> str:
        """What the device plugin advertises each instance as."""
        return GPU_RESOURCE if self.strategy == SINGLE else f"{RESOURCE_PREFIX}{self.profile}"


def is_capable(model: str) -> bool:
    return any(family in model for family in MIG_CAPABLE_MODELS)


def memory_class(memory_mib: int) -> int | None:
    """The framebuffer size (GB) a GPU with `memory_mib` is sold as, among the MIG-capable
    ones (None: no MIG-capable GPU has that much)."""
    gb = memory_mib / 1024
    return next((size for size in PROFILES if abs(gb - size) <= 4), None)


def profile_problem(profile: str, memory_mib: int | None = None) -> str | None:
    """Why `profile` is no GPU instance profile (of a GPU with `memory_mib`, when given)."""
    match = PROFILE_RE.match(profile)
    if not match or int(match["slices"]) not in _INSTANCE_IDS:
        sizes = ", ".join(f"{s}g" for s in _INSTANCE_IDS)
        return f"MIG profile must look like 1g.10gb with a size of {sizes}, got {profile!r}"
    if memory_mib is None:
        return None
    size = memory_class(memory_mib)
    if size is None:
        return f"no MIG-capable GPU has {memory_mib} MiB of memory"
    if profile not in PROFILES[size]:
        return (
            f"MIG profile {profile} does not exist on a {size} GB GPU "
            f"(its profiles: {', '.join(PROFILES[size])})"
        )
    return None


def config_problem(config: str, memory_mib: int) -> str | None:
    """Why mig-manager cannot apply the configuration `config` (None: it can): only
    `all-disabled` and `all-<profile>` are simulated."""
    if config == DISABLED:
        return None
    if not config.startswith("all-"):
        return f"unknown MIG configuration {config!r}"
    return profile_problem(config.removeprefix("all-"), memory_mib)


def layout_for(config: str, strategy: str) -> MigLayout | None:
    """The layout of a configuration `config_problem` accepts (None: MIG disabled)."""
    return None if config == DISABLED else MigLayout(config.removeprefix("all-"), strategy)


def node_labels(model: str, gpus: int, memory_mib: int, layout: MigLayout) -> dict[str, str]:
    """What GFD labels a node with, its `gpus` GPUs (of `memory_mib` each) split as `layout`."""
    common = {
        STRATEGY_LABEL: layout.strategy,
        CONFIG_LABEL: layout.config,
        CONFIG_STATE_LABEL: "success",
    }
    if layout.strategy == SINGLE:
        return {
            **common,
            PRODUCT_LABEL: f"{model}-MIG-{layout.profile}",
            COUNT_LABEL: str(gpus * layout.per_gpu),
            MEMORY_LABEL: str(layout.memory_mib),
            "nvidia.com/gpu.slices.gi": str(layout.slices),
            "nvidia.com/gpu.slices.ci": str(layout.slices),
        }
    prefix = f"{RESOURCE_PREFIX}{layout.profile}"
    return {
        **common,
        PRODUCT_LABEL: model,
        COUNT_LABEL: str(gpus),
        MEMORY_LABEL: str(memory_mib),
        f"{prefix}.count": str(gpus * layout.per_gpu),
        f"{prefix}.memory": str(layout.memory_mib),
        f"{prefix}.slices.gi": str(layout.slices),
        f"{prefix}.slices.ci": str(layout.slices),
    }


def node_resources(gpus: int, layout: MigLayout) -> dict[str, int]:
    """What the device plugin advertises for `gpus` GPUs split as `layout`."""
    return {layout.resource: gpus * layout.per_gpu}


def layout_of(labels: dict[str, str]) -> MigLayout | None:
    """The node's MIG layout as GFD last labelled it (None: whole GPUs). Not the requested
    `nvidia.com/mig.config`: while mig-manager works on a new one, the node still has the
    old instances."""
    strategy = labels.get(STRATEGY_LABEL)
    if strategy == SINGLE:
        _, _, profile = labels.get(PRODUCT_LABEL, "").partition("-MIG-")
        return MigLayout(profile) if profile_problem(profile) is None else None
    if strategy == MIXED:
        for key in labels:
            match = _MIXED_COUNT_RE.match(key)
            if match and profile_problem(match["profile"]) is None:
                return MigLayout(match["profile"], MIXED)
    return None


def full_gpu_memory(labels: dict[str, str], layout: MigLayout | None) -> int:
    """A GPU's whole framebuffer (MiB). Under the single strategy GFD labels only an
    instance's: the GPU's is then the size its product is named after (NVIDIA-A100-SXM4-80GB),
    or failing that the size whose profiles include the node's."""
    if layout is None or layout.strategy != SINGLE:
        return int(labels.get(MEMORY_LABEL) or 81920)
    model = parent_model(labels.get(PRODUCT_LABEL, ""))
    named = re.search(r"(\d+)GB", model)
    if named and int(named[1]) in PROFILES:
        return int(named[1]) * 1024
    size = next((s for s, names in PROFILES.items() if layout.profile in names), 80)
    return size * 1024


def parent_model(product: str) -> str:
    """The GPU model of GFD's product label, without the MIG or sharing suffix."""
    return product.split("-MIG-", 1)[0].removesuffix("-SHARED")
