"""GPU sharing as the NVIDIA device plugin's `sharing.timeSlicing` and `sharing.mps` make it.

Each GPU is advertised as `replicas` devices that take turns on it (time-slicing) or run
side by side under the MPS control daemon. Without `renameByDefault` the replicas keep the
name `nvidia.com/gpu`, and GPU feature discovery (GFD) marks the product `<model>-SHARED`;
with it they are `nvidia.com/gpu.shared` and the product keeps its name. GFD also labels
the replicas, the strategy and the physical GPUs. The config is the device plugin's named
configuration, chosen per node by the `nvidia.com/device-plugin.config` label.

dcgm-exporter still sees the physical GPUs: one series each, however many replicas.
Sharing MIG instances is not simulated: sharing applies to whole GPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kubesim.mig import COUNT_LABEL, GPU_RESOURCE, PRODUCT_LABEL

TIME_SLICING, MPS = "time-slicing", "mps"
STRATEGIES = (TIME_SLICING, MPS)
SHARED_RESOURCE = "nvidia.com/gpu.shared"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
DEFAULT_CONFIG = "default"  # the device plugin's configuration without sharing
SHARED_SUFFIX = "-SHARED"
MIN_REPLICAS = 2
# The configurations kubesim's device plugin knows, by name: time-sliced-4, mps-4,
# time-sliced-4-renamed (renameByDefault: true).
_CONFIG_NAMES = {TIME_SLICING: "time-sliced", MPS: "mps"}
_CONFIG_RE = re.compile(r"^(?P<kind>time-sliced|mps)-(?P<replicas>[0-9]+)(?P<renamed>-renamed)?$")


@dataclass(frozen=True)
class Sharing:
    strategy: str  # time-slicing | mps
    replicas: int  # devices advertised per GPU
    rename: bool = False  # renameByDefault: nvidia.com/gpu.shared

    @property
    def config(self) -> str:
        """The device plugin configuration's name (`nvidia.com/device-plugin.config`)."""
        name = f"{_CONFIG_NAMES[self.strategy]}-{self.replicas}"
        return f"{name}-renamed" if self.rename else name

    @property
    def resource(self) -> str:
        return SHARED_RESOURCE if self.rename else GPU_RESOURCE


def strategy_problem(strategy: str) -> str | None:
    if strategy not in STRATEGIES:
        return f"sharing strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}"
    return None


def config_problem(config: str) -> str | None:
    """Why the device plugin has no configuration named `config` (None: it has)."""
    if config == DEFAULT_CONFIG:
        return None
    match = _CONFIG_RE.match(config)
    if match is None:
        return (
            f"unknown device plugin configuration {config!r} (known: {DEFAULT_CONFIG}, "
            "time-sliced-N, mps-N, each optionally -renamed)"
        )
    if int(match["replicas"]) < MIN_REPLICAS:
        return f"a sharing configuration needs at least {MIN_REPLICAS} replicas, got {config!r}"
    return None


def from_config(config: str) -> Sharing | None:
    """The sharing of a configuration `config_problem` accepts (None: the default, whole
    GPUs)."""
    match = _CONFIG_RE.match(config)
    if match is None:
        return None
    strategy = TIME_SLICING if match["kind"] == "time-sliced" else MPS
    return Sharing(strategy, int(match["replicas"]), rename=bool(match["renamed"]))


def node_labels(model: str, gpus: int, sharing: Sharing) -> dict[str, str]:
    """What GFD labels a node with whose `gpus` GPUs are shared."""
    return {
        PRODUCT_LABEL: model if sharing.rename else f"{model}{SHARED_SUFFIX}",
        COUNT_LABEL: str(gpus),
        REPLICAS_LABEL: str(sharing.replicas),
        STRATEGY_LABEL: sharing.strategy,
        CONFIG_LABEL: sharing.config,
    }


def node_resources(gpus: int, sharing: Sharing) -> dict[str, int]:
    return {sharing.resource: gpus * sharing.replicas}


def sharing_of(labels: dict[str, str]) -> Sharing | None:
    """The node's sharing as GFD last labelled it (None: GPUs not shared)."""
    strategy = labels.get(STRATEGY_LABEL, "")
    replicas = labels.get(REPLICAS_LABEL, "")
    if strategy not in STRATEGIES or not replicas.isdigit() or int(replicas) < MIN_REPLICAS:
        return None
    renamed = not labels.get(PRODUCT_LABEL, "").endswith(SHARED_SUFFIX)
    return Sharing(strategy, int(replicas), rename=renamed)
