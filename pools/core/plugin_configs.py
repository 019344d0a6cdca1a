"""The device plugin's named sharing configurations a node can be switched to (pure).

The facts relied on, from NVIDIA's device plugin and GPU operator: the plugin reads its
configurations from a ConfigMap, one per name, and a node picks one with the label
`nvidia.com/device-plugin.config=<name>`; the plugin's config manager restarts it with that
configuration, and GPU feature discovery (GFD) relabels the node with what it now
advertises: `nvidia.com/gpu.replicas` (1 when not shared) and
`nvidia.com/gpu.sharing-strategy` (`time-slicing`, `mps`, or `none`). There is no state
label: the relabelling is how the change is seen. Sharing applies to whole GPUs; a GPU split
into MIG instances keeps its instances.

The names are the site's own, so the portal knows them from the setting
`DEVICE_PLUGIN_CONFIGS`: `name=whole` or `name=<time-slicing|mps>:<replicas>`, comma
separated (`default=whole,time-sliced-4=time-slicing:4,mps-4=mps:4`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

WHOLE = "whole"
TIME_SLICING, MPS = "time-slicing", "mps"
STRATEGIES = (TIME_SLICING, MPS)
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
UNSHARED = ("", "none")  # GFD's sharing strategy on a node whose GPUs are not shared
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")  # a label value


@dataclass(frozen=True)
class PluginConfig:
    name: str
    strategy: str = ""  # "" for whole GPUs
    replicas: int = 1

    @property
    def label(self) -> str:
        if not self.strategy:
            return f"{self.name} (whole GPUs)"
        return f"{self.name} ({self.strategy}, {self.replicas} per GPU)"


class PluginConfigsError(ValueError):
    """DEVICE_PLUGIN_CONFIGS cannot be read: the message names the entry."""


def parse_plugin_configs(text: str) -> dict[str, PluginConfig]:
    configs: dict[str, PluginConfig] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, value = (part.strip() for part in entry.partition("="))
        if not sep or not _NAME.match(name):
            raise PluginConfigsError(
                f"{entry!r}: expected name=whole or name=<time-slicing|mps>:<replicas>, the "
                "name a label value"
            )
        if name in configs:
            raise PluginConfigsError(f"{entry!r}: {name} is listed twice")
        configs[name] = _config(entry, name, value)
    return configs


def _config(entry: str, name: str, value: str) -> PluginConfig:
    if value == WHOLE:
        return PluginConfig(name)
    strategy, _, replicas = value.partition(":")
    if strategy not in STRATEGIES or not replicas.isdigit() or int(replicas) < 2:
        raise PluginConfigsError(
            f"{entry!r}: expected whole, or {' or '.join(STRATEGIES)} and at least 2 "
            "replicas (time-slicing:4)"
        )
    return PluginConfig(name, strategy, int(replicas))


def plugin_config_problem(
    name: str, *, known: Mapping[str, PluginConfig], layouts: Collection[str]
) -> str | None:
    """Why a node offering its GPUs in `layouts` cannot be switched to configuration
    `name` (None: it can)."""
    if name not in known:
        listed = ", ".join(sorted(known)) or "none are"
        return (
            f"{name!r} is not a device plugin configuration listed in DEVICE_PLUGIN_CONFIGS "
            f"({listed})"
        )
    if any(layout.startswith("mig-") for layout in layouts):
        return (
            "its GPUs are split into MIG instances, and sharing applies to whole GPUs: set its "
            "MIG configuration to all-disabled first"
        )
    return None


def advertised(config: PluginConfig, labels: Mapping[str, str]) -> bool:
    """Whether GFD's labels say the node advertises `config`'s sharing."""
    replicas = labels.get(REPLICAS_LABEL, "")
    strategy = labels.get(STRATEGY_LABEL, "")
    if not config.strategy:
        return replicas in ("", "1") and strategy in UNSHARED
    return replicas == str(config.replicas) and strategy == config.strategy
