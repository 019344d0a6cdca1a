"""The XID meanings the node page shows (pure)."""

from __future__ import annotations

import pytest

from pools.core.xid import xid_meaning


@pytest.mark.parametrize(
    ("code", "meaning"),
    [
        (13, "Graphics Engine Exception"),
        (31, "GPU memory page fault"),
        (43, "GPU stopped processing"),
        (48, "Double-bit ECC error"),
        (63, "ECC page retirement or row remapping recording event"),
        (64, "ECC page retirement or row remapper recording failure"),
        (74, "NVLink error"),
        (79, "GPU has fallen off the bus"),
        (92, "High single-bit ECC error rate"),
        (94, "Contained ECC error"),
        (95, "Uncontained ECC error"),
        (119, "GSP RPC timeout"),
        (120, "GSP error"),
    ],
)
def test_common_xid_codes_have_their_meaning(code: int, meaning: str) -> None:
    assert xid_meaning(code) == meaning


def test_zero_is_no_error_and_an_unlisted_code_points_to_the_catalogue() -> None:
    assert xid_meaning(0) == "no XID error"
    assert xid_meaning(157) == "XID 157: see NVIDIA's XID catalogue"
