"""Which MIG configurations a node may be asked to take (pure).

The GPU operator's MIG manager applies the configuration a node's `nvidia.com/mig.config`
label names, from its mig-parted config (the operator's default holds `all-disabled`, and
`all-<profile>` for every profile of every supported GPU, e.g. `all-1g.10gb`). A profile is
`<slices>g.<memory>gb`; its memory is a fraction of the GPU's, rounded: on the seven-slice
GPUs (A100, H100, H200, B200) 1g holds an eighth (or two, the `1g.20gb` kind on H100 and
later), 2g two eighths, 3g and 4g half, 7g all of it; on the four-slice A30 1g a quarter,
2g half, 4g all. So an A100-80GB takes 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb and 7g.80gb, and
an H200 (141 GB) 1g.18gb, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb and 7g.141gb. Named configs
beyond those (`all-balanced`, a site's own) are allowed by the setting MIG_CONFIGS.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection

from pools.core.devices import physical_model

DISABLED = "all-disabled"
CONFIG_PREFIX = "all-"
_MEMORY_GB_RE = re.compile(r"-(?P<gb>[0-9]+)GB(?:-|$)")
_KNOWN_MEMORY_GB = {"H200": 141, "GB200": 186, "B200": 180, "A30": 24}
_SEVEN_SLICES = {1: (1, 2), 2: (2,), 3: (4,), 4: (4,), 7: (8,)}  # eighths of the memory
_FOUR_SLICES = {1: (1,), 2: (2,), 4: (4,)}  # quarters, on the A30


def _memory_gb(model: str) -> int:
    if match := _MEMORY_GB_RE.search(model):
        return int(match["gb"])
    return next((gb for name, gb in _KNOWN_MEMORY_GB.items() if name in model), 0)


def mig_profiles(model: str) -> tuple[str, ...]:
    """The MIG profiles a GPU of `model` (GFD's product name) takes; none when unknown."""
    model = physical_model(model)
    memory = _memory_gb(model)
    if not memory:
        return ()
    four = "A30" in model
    parts, table = (4, _FOUR_SLICES) if four else (8, _SEVEN_SLICES)
    profiles = []
    for slices, shares in table.items():
        for share in shares:
            gb = math.floor(memory * share / parts + 0.5)
            profiles.append(f"{slices}g.{gb}gb")
    return tuple(dict.fromkeys(profiles))


def mig_config_problem(
    config: str, *, model: str, mig_capable: bool, named: Collection[str] = ()
) -> str | None:
    """Why a node with GPUs of `model` cannot be asked to take MIG configuration `config`,
    or None. `named`: the site's own configurations besides all-disabled and all-<profile>."""
    if not mig_capable:
        return f"its GPUs ({physical_model(model) or 'unknown'}) do not support MIG"
    if config == DISABLED or config in named:
        return None
    profile = config.removeprefix(CONFIG_PREFIX)
    profiles = mig_profiles(model)
    if not config.startswith(CONFIG_PREFIX) or not re.fullmatch(r"[1-7]g\.[0-9]+gb", profile):
        extra = f", or one of {', '.join(sorted(named))}" if named else ""
        return (
            f"{config!r} is not a MIG configuration: use {DISABLED} or all-<profile> "
            f"(e.g. all-1g.10gb){extra}"
        )
    if profile not in profiles:
        takes = ", ".join(profiles) if profiles else "no profile this portal knows"
        return f"a {physical_model(model)} cannot take {profile}: it takes {takes}"
    return None
