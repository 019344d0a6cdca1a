"""The node table as CSV, filtered by the same FilterSet as its page and the API
(pools/fleet/filters.py): a generator of rows over one database cursor, so a response
streams whatever the size of the list and costs a constant number of queries.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import QuerySet

from pools.core import csv_cells
from pools.core.devices import DEVICE_COLUMNS, WHOLE, devices_of_row
from pools.metrics.node_figures import latest_node_metrics
from pools.models import Node

NODE_COLUMNS = (
    "name",
    "pool",
    "gpu_model",
    "gpus",
    "allocated",
    "unallocated",
    "ready",
    "cordoned",
    "drifted",
    "pods",
    "util_percent",
    "fb_used_mib",
    "fb_total_mib",
    "temp_max_celsius",
    "xid_gpus",
    "last_seen",
    "gone_at",
    "physical_gpus",
    "other_units",
)


def node_csv_rows(nodes: QuerySet[Node]) -> Iterator[list[object]]:
    """The node table with each node's latest DCGM figures (blank where there are none).
    `gpus` and `allocated` count whole GPUs, as the pages do; `physical_gpus` every GPU,
    and `other_units` each other kind as "allocated/allocatable label" (MIG instances,
    shared GPUs), separated by "; "."""
    _, metrics = latest_node_metrics()
    yield list(NODE_COLUMNS)
    fields = ("name", "pool__name", "gpu_model", "gpu_allocatable", "gpu_allocated", "ready")
    more = ("cordoned", "drifted", "pods", "last_seen", "gone_at")
    device_fields = [c for c in DEVICE_COLUMNS if c not in fields]
    for row in (
        nodes.order_by("name")
        .values_list(*fields, *more, *device_fields)
        .iterator(csv_cells.EXPORT_CHUNK_ROWS)
    ):
        name, pool, model, _, _, ready, cordoned, drifted, pods, seen, gone = row[:11]
        devices = devices_of_row(dict(zip((*fields, *more, *device_fields), row, strict=True)))
        gpus, allocated = devices.whole_gpus, devices.whole_allocated
        others = "; ".join(
            f"{u.allocated}/{u.allocatable} {u.kind.label}"
            for u in devices.units
            if u.kind.kind != WHOLE
        )
        m = metrics.get(name)
        yield csv_cells.row(
            [name, pool, model, gpus, allocated, max(0, gpus - allocated), ready, cordoned]
            + [drifted, len(pods)]
            + ([m.util, m.fb_used, m.fb_total, m.temp_max, m.xid_gpus] if m else [None] * 5)
            + [seen, gone, devices.gpus, others]
        )
