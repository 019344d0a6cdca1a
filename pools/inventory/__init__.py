"""The inventory: the cluster's GPU nodes as `Node` rows and its GPU pods as `GpuPod` rows.

Two writers keep them: the watcher (`manage.py watch_inventory`, pools/inventory/watch.py),
which lists once and then follows a WATCH within seconds, and the full sync
(pools/inventory/sync.py), the periodic safety net. A lease row (pools/inventory/lease.py)
lets one of them write at a time.
"""

from pools.inventory.rows import build_node
from pools.inventory.sync import (
    SyncReport,
    drift_recompute,
    inventory_refresh_node,
    inventory_refresh_nodes,
    inventory_sync,
)

__all__ = [
    "SyncReport",
    "build_node",
    "drift_recompute",
    "inventory_refresh_node",
    "inventory_refresh_nodes",
    "inventory_sync",
]
