"""The MIG configurations a node may be asked to take, by its GPU model."""

from __future__ import annotations

import pytest

from pools.core.mig_configs import mig_config_problem, mig_profiles


@pytest.mark.parametrize(
    ("model", "profiles"),
    [
        (
            "NVIDIA-A100-SXM4-80GB",
            ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        ),
        (
            "NVIDIA-A100-SXM4-40GB",
            ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
        ),
        ("NVIDIA-H200", ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
        ("NVIDIA-A30", ("1g.6gb", "2g.12gb", "4g.24gb")),
        ("NVIDIA-L40S", ()),
        ("NVIDIA-A30-24GB", ("1g.6gb", "2g.12gb", "4g.24gb")),
        (
            "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
            ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        ),
    ],
)
def test_profiles_follow_the_models_memory_and_slices(
    model: str, profiles: tuple[str, ...]
) -> None:
    assert mig_profiles(model) == profiles


def test_what_a_node_cannot_take_is_said_plainly() -> None:
    a100 = "NVIDIA-A100-SXM4-80GB"
    assert mig_config_problem("all-3g.40gb", model=a100, mig_capable=True) is None
    assert mig_config_problem("all-disabled", model=a100, mig_capable=True) is None
    assert (
        mig_config_problem("all-balanced", model=a100, mig_capable=True, named=["all-balanced"])
        is None
    )
    assert mig_config_problem("all-3g.20gb", model=a100, mig_capable=True) == (
        "a NVIDIA-A100-SXM4-80GB cannot take 3g.20gb: it takes 1g.10gb, 1g.20gb, 2g.20gb, "
        "3g.40gb, 4g.40gb, 7g.80gb"
    )
    assert "is not a MIG configuration" in (
        mig_config_problem("3g", model=a100, mig_capable=True) or ""
    )
    assert mig_config_problem("all-1g.10gb", model="NVIDIA-L40S", mig_capable=False) == (
        "its GPUs (NVIDIA-L40S) do not support MIG"
    )
