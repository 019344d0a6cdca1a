"""A page of a pod listing read into what the inventory keeps of each pod (pure): its summary
on its node, and a GPU pod's row. Reading is most of an initial sync's work (the JSON, the
requests as the scheduler counts them, the record), and needs nothing but the page, so a
large listing is read in a process of its own beside the one writing the rows
(pools.inventory.pod_pages): the second core of a small machine does it.

Only the standard library, msgspec and the pure core are imported here, so that a spawned
process reading pages starts in a fraction of a second, without Django."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from pools.core.devices import is_gpu_unit
from pools.core.fit.resources import Resources
from pools.core.pod_record import PodLabels, pod_record, pod_requests
from pools.core.snapshot import PodSummary, pod_summary
from pools.core.sqlite_values import SqliteRow

Raw = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PageContext:
    """What reading a page needs besides the page: the settings' pod labels, each node's
    pool now (a new pod's row takes it), the time of the listing, and on SQLite the upsert's
    columns, so that each GPU pod comes back as the statement's parameters: building them
    (the JSON text of its labels and scheduling blocks, its times as text) moves out of the
    writing process too, and a tuple of strings crosses between processes for less."""

    labels: PodLabels
    node_pools: Mapping[str, str]
    observed: datetime
    cluster: str = ""
    sqlite: SqliteRow | None = None


@dataclass(frozen=True, slots=True)
class ListedPod:
    uid: str
    resource_version: str
    summary: PodSummary | None  # bound and not finished: counted on its node
    # A GPU pod's row: its values by GpuPod attribute name, or with `PageContext.sqlite`, the
    # upsert's parameters; None for any other pod.
    row: dict[str, Any] | tuple[Any, ...] | None


def is_gpu_pod(requests: Resources) -> bool:
    """A pod that asks for a GPU unit of any kind: a whole GPU, a MIG instance, a share."""
    return requests.gpu > 0 or any(n > 0 and is_gpu_unit(name) for name, n in requests.extended)


def gpu_pod_row(
    raw: Raw,
    requests: Resources,
    *,
    labels: PodLabels,
    node_pools: Mapping[str, str],
    observed: datetime,
) -> dict[str, Any]:
    """A GPU pod's row values; `node_pools` maps node names to their pool label now (the
    pool the pod is bound in, when its row is new)."""
    record = pod_record(raw, labels=labels, observed=observed, requests=requests)
    # A pod first seen finished may have run before its node's last move: its row is made
    # without a pool, and the pool fill places it knowing the moves.
    pool = "" if record.finished_at is not None else node_pools.get(record.node_name, "")
    return {**vars(record), "pool_label": pool, "deleted_at": None, "updated_at": observed}


def listed_pods(
    items: Iterable[Raw], context: PageContext, cache: dict[str, Resources]
) -> list[ListedPod]:
    """Each pod of a page, read; `cache` keeps the requests of pods that look alike."""
    found = []
    for raw in items:
        meta = raw.get("metadata") or {}
        requests = pod_requests(raw, cache)
        summary = pod_summary(raw, requests)
        row: dict[str, Any] | tuple[Any, ...] | None = None
        if is_gpu_pod(requests):
            row = gpu_pod_row(
                raw,
                requests,
                labels=context.labels,
                node_pools=context.node_pools,
                observed=context.observed,
            )
            if context.sqlite is not None:
                row = context.sqlite.parameters({**row, "cluster": context.cluster})
        found.append(
            ListedPod(
                str(meta.get("uid") or ""),
                str(meta.get("resourceVersion") or ""),
                summary if summary is not None and not summary.finished else None,
                row,
            )
        )
    return found


# --- in a process that reads pages -------------------------------------------------------

_context: PageContext | None = None
_cache: dict[str, Resources] = {}


def reader_start(context: PageContext) -> None:
    """A reading process's initializer: the listing's context, once."""
    global _context
    _context = context
    _cache.clear()


def page_read(body: bytes) -> list[ListedPod]:
    """A page as the API server sent it (a PodList's JSON), read in the reading process."""
    assert _context is not None, "reader_start first"
    items = msgspec.json.decode(body).get("items") or []
    return listed_pods(items, _context, _cache)
