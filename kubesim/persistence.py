"""`--state FILE`: the cluster's objects kept across a restart, as etcd keeps them.

Saved when the simulator stops (SIGTERM or SIGINT), loaded when it starts if the file is
there (the scenario is then not seeded again). The resourceVersion counter goes on from
where it stopped; the watch history does not survive, so a watch resumed from before the
restart gets 410 Gone, as after a real API server restart. Terminating pods finish their
grace period on the clock that was saved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

FORMAT = "kubesim-state/v1"


def save(cluster: Cluster, path: Path) -> None:
    store = cluster.store
    with store.lock:
        document = {
            "format": FORMAT,
            "resourceVersion": store.rv,
            "objects": {
                resource: [e.obj for _, e in sorted(entries.items())]
                for resource, entries in store.objects.items()
                if entries
            },
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(document, separators=(",", ":")))
    tmp.replace(path)  # a crash while saving leaves the previous state whole


def load(cluster: Cluster, path: Path) -> bool:
    """Restore a saved state; False when there is none. Raises ValueError for a bad file."""
    if not path.exists():
        return False
    try:
        document = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path}: not a kubesim state file: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{path}: not a kubesim state file (format {FORMAT!r} expected)")
    cluster.store.restore(int(document["resourceVersion"]), document["objects"])
    cluster.termination.rearm()
    cluster.settle()
    return True
