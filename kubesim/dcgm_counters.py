"""What dcgm-exporter 4.x exports by default, and how it writes each value.

The counters are the active rows of the exporter's `etc/default-counters.csv` (25 series and
the `DCGM_FI_DRIVER_VERSION` label), in the file's order, with its types and help texts.
The exporter formats a DCGM value by the field's type: an INT64 field with `%d` (`93`), a
DOUBLE field with Go's `%f` (`412.500000`); only the power draw and the profiling ratios are
doubles here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Counter:
    name: str
    kind: str  # the Prometheus type
    help: str
    double: bool = False  # a DCGM_FT_DOUBLE field (else DCGM_FT_INT64)
    mig: bool = True  # reported for a MIG GPU instance


COUNTERS: tuple[Counter, ...] = (
    Counter("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    Counter("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    Counter("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    Counter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    Counter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", double=True),
    Counter(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    Counter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    # The utilisation fields are not supported on MIG instances (DCGM answers blank, and the
    # exporter skips blank values): a MIG GPU's activity shows in the profiling ratios only.
    Counter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", mig=False),
    Counter("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", mig=False),
    Counter("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", mig=False),
    Counter("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", mig=False),
    Counter("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    Counter("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    Counter("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    Counter("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    Counter(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
    ),
    Counter("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    Counter(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    Counter(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
    ),
    Counter("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    Counter(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
        double=True,
    ),
    Counter(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        double=True,
    ),
    Counter(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        double=True,
    ),
    Counter(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers "
        "and data payloads - in bytes per second.",
    ),
    Counter(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers "
        "and data payloads - in bytes per second.",
    ),
)
XID_COUNTER = "DCGM_FI_DEV_XID_ERRORS"

# The exporter's `err_msg` for an XID code (its table follows NVIDIA's XID documentation);
# the codes a GPU node meets most. Codes not listed here are "Unknown Error" in kubesim.
XID_MESSAGES: dict[int, str] = {
    0: "No Error",
    8: "GPU stopped processing",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    32: "Invalid or corrupted push buffer stream",
    38: "Driver firmware error",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors -- Most likely to see when running "
    "multiple cuda",
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    69: "Graphics Engine class error",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    109: "Context Switch Timeout Error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    121: "C2C Link Error",
    140: "Unrecovered ECC Error",
}
UNKNOWN_XID = "Unknown Error"


def xid_message(code: int) -> str:
    return XID_MESSAGES.get(code, UNKNOWN_XID)


def format_value(counter: Counter, value: float) -> str:
    """The value as the exporter writes it: `%d` for an INT64 field, `%f` for a DOUBLE."""
    return f"{value:f}" if counter.double else str(int(value))
