"""What an XID code means: the codes GPU nodes report most, as NVIDIA's XID catalogue names
them (pure: no Django)."""

from __future__ import annotations

XID_MEANINGS: dict[int, str] = {
    8: "GPU stopped processing",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    32: "Invalid or corrupted push buffer stream",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double-bit ECC error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    69: "Graphics Engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    109: "Context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "Unrecovered ECC error",
}


def xid_meaning(code: int) -> str:
    """The meaning of `code`, or a pointer to the catalogue for a code not listed here."""
    if code == 0:
        return "no XID error"
    return XID_MEANINGS.get(code, f"XID {code}: see NVIDIA's XID catalogue")
