"""The inventory watcher: nodes and pods kept current the way a Kubernetes informer does.

For each resource, one paged LIST, then a WATCH from the list's resourceVersion with
bookmarks. A 410 Gone (the server's history no longer reaches back that far, as after an
API server restart) lists that resource again; a dropped connection resumes from the last
resourceVersion seen, after a backoff. The two streams run in their own threads and only
touch the in-memory state (`WatchState`): a node's snapshot, and a small summary of each
bound pod by node. The main thread writes what changed every FLUSH_SECONDS at most, in
one transaction of bulk statements whose number does not grow with the batch, and only
what changed: a node whose pods alone changed gets its four pod columns (and last_seen), a
re-list leaves the rows of unchanged nodes and pods as they are but for one statement that
moves every present node's last_seen on.

Only the holder of the inventory lease writes; it renews the lease as it goes and stops
writing the moment a renewal fails (someone took over after it stalled).
"""

from __future__ import annotations

import collections
import gc
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from pools.common import observability
from pools.common.cluster_access import current_cluster, pool_label_key
from pools.common.heartbeat import Heartbeat
from pools.core.fit.resources import Resources
from pools.core.gc_pause import collector_paused
from pools.core.pod_page import PageContext, gpu_pod_row, is_gpu_pod
from pools.core.pod_record import pod_requests
from pools.core.snapshot import NodeSnapshot, PodSummary, is_gpu_node, node_snapshot, pod_summary
from pools.inventory.dra import dra_sync_logged
from pools.inventory.lease import (
    Contact,
    holder_name,
    lease_acquire,
    lease_holder,
    lease_release,
    lease_renew,
    relist_taken,
)
from pools.inventory.pod_pages import pod_pages
from pools.inventory.rows import (
    PodRowsListed,
    active_pools,
    gpu_pod_sqlite_row,
    gpu_pods_pool_fill,
    gpu_pods_upsert,
    gpu_pods_write,
    node_row,
    node_rows_upsert,
    nodes_gone,
    nodes_pods_update,
    nodes_present,
    nodes_seen,
    pod_labels,
)
from pools.kube.errors import KubeError, KubeUnavailable
from pools.kube.nodes import Raw, core_api
from pools.kube.read_ahead import read_ahead
from pools.kube.watching import (
    RESOURCES,
    OpenStreams,
    WatchExpired,
    list_pages,
    watch_events,
)

log = logging.getLogger(__name__)

# Writes are batched: at most this often, however busy the cluster.
FLUSH_SECONDS = 0.5
BACKOFF_MAX = 10.0
CHUNK = 1000  # nodes a transaction, when a list's batch is written
LOGGED_BATCH = 1000  # a list's writes are logged, the watch's small batches are not


class LeaseLost(Exception):
    """The lease was taken over: this process must stop writing."""


@dataclass
class Batch:
    """What one flush writes, taken from the state under its lock."""

    nodes: list[NodeSnapshot]  # written whole
    pods_by_node: dict[str, list[PodSummary]]
    gone: set[str]
    pods_only: list[str]  # nodes whose pods alone changed: only their pod columns written
    pod_rows: list[dict[str, Any]]
    received: dict[str, float]  # resource -> when its newest change arrived (monotonic)
    # After a full list of the nodes: the names of every node the state holds; the rows of
    # any other node are gone.
    present: frozenset[str] | None = None

    def __len__(self) -> int:
        return len(self.nodes) + len(self.gone) + len(self.pod_rows) + len(self.pods_only)


@dataclass
class ApiContact:
    """Per resource, when its stream last had an answer from the API server (monotonic) and
    what has gone wrong since: the rows are only as fresh as the oldest."""

    heard: dict[str, float] = field(default_factory=dict)
    trouble: dict[str, str] = field(default_factory=dict)

    def answered(self, resource: str) -> None:
        self.heard[resource] = time.monotonic()
        self.trouble.pop(resource, None)

    def failed(self, resource: str, why: str) -> None:
        self.trouble[resource] = why

    def now(self) -> Contact:
        heard = [self.heard.get(resource) for resource in RESOURCES]
        known = [h for h in heard if h is not None]
        ago = time.monotonic() - min(known) if len(known) == len(heard) else None
        troubles = [self.trouble[r] for r in RESOURCES if r in self.trouble]
        return Contact(ago, "; ".join(troubles))


@dataclass
class WatchState:
    """The cluster as the streams last told it, and what changed since the last flush."""

    nodes: dict[str, NodeSnapshot] = field(default_factory=dict)  # GPU nodes
    pods: dict[str, dict[str, PodSummary]] = field(
        default_factory=lambda: collections.defaultdict(dict)
    )  # node -> uid -> a bound pod that has not finished
    versions: dict[str, str] = field(default_factory=dict)  # resource -> resourceVersion
    dirty: set[str] = field(default_factory=set)  # nodes whose object changed
    pods_dirty: set[str] = field(default_factory=set)  # nodes whose pods changed
    # node -> its pods as the last batch took them: a pod event that changed nothing the
    # node's row shows (a condition, an annotation) writes nothing.
    taken_pods: dict[str, frozenset[PodSummary]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    pod_rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    received: dict[str, float] = field(default_factory=dict)
    relist: set[str] = field(default_factory=set)  # resources to list again
    streams: OpenStreams = field(default_factory=OpenStreams)  # ended at once for a re-list
    listed: bool = False  # the nodes were listed since the last take
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Event = field(default_factory=threading.Event)
    requests_cache: dict[str, Resources] = field(default_factory=dict)
    contact: ApiContact = field(default_factory=ApiContact)

    def take(self) -> Batch:
        """What changed since the last take. Nodes whose object changed are written whole;
        when there are none, nodes whose pods alone changed get only their pod columns (a
        narrow update: no drift, no labels), else they are written whole with the others,
        so a flush writes the node rows with one statement."""
        with self.lock:
            whole = self.dirty & self.nodes.keys()
            pods_only = {n for n in self.pods_dirty - whole if self._pods_moved(n)}
            if whole:
                whole, pods_only = whole | pods_only, set()
            pods_by_node = {}
            for name in whole | pods_only:
                pods = self.pods.get(name, {})
                self.taken_pods[name] = frozenset(pods.values())
                pods_by_node[name] = list(pods.values())
            batch = Batch(
                nodes=[self.nodes[n] for n in whole],
                pods_by_node=pods_by_node,
                gone=self.gone - self.nodes.keys(),
                pods_only=sorted(pods_only),
                pod_rows=list(self.pod_rows.values()),
                received=dict(self.received),
                present=frozenset(self.nodes) if self.listed else None,
            )
            self.dirty, self.pods_dirty, self.gone, self.pod_rows = set(), set(), set(), {}
            self.received, self.listed = {}, False
            self.changed.clear()
        return batch

    def _pods_moved(self, name: str) -> bool:
        if name not in self.nodes:
            return False
        return frozenset(self.pods.get(name, {}).values()) != self.taken_pods.get(name)

    def node_event(self, kind: str, raw: Raw) -> None:
        name = raw["metadata"]["name"]
        with self.lock:
            if kind == "DELETED" or not is_gpu_node(raw):
                if self.nodes.pop(name, None) is not None:
                    self.gone.add(name)
                    self.taken_pods.pop(name, None)
            else:
                self.nodes[name] = node_snapshot(raw)
                self.gone.discard(name)
                self.dirty.add(name)
            self._changed("nodes")

    def pod_event(self, kind: str, raw: Raw, now: datetime) -> None:
        requests = pod_requests(raw, self.requests_cache)
        summary = pod_summary(raw, requests)
        uid = str(raw["metadata"].get("uid") or "")
        with self.lock:
            if summary is not None:
                on_node = self.pods[summary.node]
                if kind == "DELETED" or summary.finished:
                    on_node.pop(uid, None)
                else:
                    on_node[uid] = summary
                self.pods_dirty.add(summary.node)
            if is_gpu_pod(requests):
                # A deleted pod's row is written with its last state and when it went, even
                # when it came and went between two flushes.
                row = self._pod_row(raw, requests, now)
                self.pod_rows[uid] = {**row, "deleted_at": now} if kind == "DELETED" else row
            self._changed("pods")

    def _pod_row(self, raw: Raw, requests: Resources, now: datetime) -> dict[str, Any]:
        node_pools = {
            name: snap.labels.get(pool_label_key(), "") for name, snap in self._node_of(raw)
        }
        return gpu_pod_row(raw, requests, labels=pod_labels(), node_pools=node_pools, observed=now)

    def _node_of(self, raw: Raw) -> Iterable[tuple[str, NodeSnapshot]]:
        name = (raw.get("spec") or {}).get("nodeName")
        if name and name in self.nodes:
            yield name, self.nodes[name]

    def nodes_listed(self, nodes: dict[str, NodeSnapshot], version: str) -> None:
        """Replace the nodes with a listing's. Only the nodes that differ from what the
        state held are written again: a re-list of an unchanged cluster writes no node row."""
        with self.lock:
            self.gone |= self.nodes.keys() - nodes.keys()
            self.dirty |= {name for name, node in nodes.items() if self.nodes.get(name) != node}
            self.nodes = nodes
            self.versions["nodes"] = version
            self.listed = True
            self._changed("nodes")

    def pods_listed(self, pods: dict[str, dict[str, PodSummary]], version: str) -> None:
        with self.lock:
            self.pods_dirty |= self.pods.keys() | pods.keys()
            self.pods = pods
            self.versions["pods"] = version
            self._changed("pods")

    def _changed(self, resource: str) -> None:
        self.received[resource] = time.monotonic()
        self.changed.set()


def flush(batch: Batch, now: datetime, still_leading: Callable[[], None] = lambda: None) -> None:
    """Write one batch: a constant number of statements whatever its size. A list's batch
    (thousands of nodes) goes in chunks, each its own transaction, `still_leading` checked
    before each (it raises LeaseLost): the lease is renewed meanwhile, and on SQLite the
    renewal waits for the writer."""
    specs, pool_ids = active_pools()
    for start in range(0, max(1, len(batch.nodes)), CHUNK):
        still_leading()
        chunk = batch.nodes[start : start + CHUNK]
        rows = [
            node_row(s, batch.pods_by_node.get(s.name, ()), specs, pool_ids, now) for s in chunk
        ]
        with transaction.atomic():
            node_rows_upsert(rows)
            if start + CHUNK >= len(batch.nodes):
                _flush_rest(batch, now)
    applied = time.monotonic()
    for resource, received in batch.received.items():
        observability.watch_lag_set(applied - received, resource=resource)


def _flush_rest(batch: Batch, now: datetime) -> None:
    gone = set(batch.gone)
    if batch.present is not None:
        gone |= {name for name in nodes_present() if name not in batch.present}
    nodes_gone(gone, now)
    if batch.present is not None:
        nodes_seen(now)
    nodes_pods_update({name: batch.pods_by_node[name] for name in batch.pods_only}, now)
    written = gpu_pods_upsert(batch.pod_rows)
    if batch.pod_rows:
        gpu_pods_pool_fill(written_since=written)


def nodes_relist(state: WatchState) -> None:
    """List every node (paged) and replace the state's nodes with what the list says."""
    nodes: dict[str, NodeSnapshot] = {}
    version = ""
    with collector_paused():
        for page in read_ahead(list_pages("nodes")):
            version = page.resource_version
            for raw in page.items:
                if is_gpu_node(raw):
                    nodes[raw["metadata"]["name"]] = node_snapshot(raw)
    state.nodes_listed(nodes, version)
    log.info("listed %d GPU nodes at resourceVersion %s", len(nodes), version)


def pods_relist(state: WatchState, leading: threading.Event) -> None:
    """List every pod (paged): GPU pods are written page by page (the list can be 100,000
    pods: they are not held), bound ones summarised by node; rows of pods the list did not
    show are marked deleted. A pod whose row already holds its resourceVersion is not
    written again: a re-list of an unchanged cluster writes no pod row."""
    since = timezone.now()
    labels = pod_labels()
    pool_key = pool_label_key()
    node_pools = {n: s.labels.get(pool_key, "") for n, s in state.nodes.items()}
    by_node: dict[str, dict[str, PodSummary]] = collections.defaultdict(dict)
    version, written = "", 0
    with state.lock:
        state.pod_rows = {}  # the list says it all
    listed = PodRowsListed.read()
    sqlite = gpu_pod_sqlite_row()
    context = PageContext(labels, node_pools, since, current_cluster(), sqlite)
    with collector_paused():
        for pods, page_version in pod_pages(context, state.requests_cache):
            version, rows = page_version, []
            for pod in pods:
                if pod.summary is not None:
                    by_node[pod.summary.node][pod.uid] = pod.summary
                if pod.row is not None and listed.changed_pod(pod.uid, pod.resource_version):
                    rows.append(pod.row)
            if not leading.is_set():
                raise LeaseLost("the lease was lost while listing pods")
            if sqlite is not None:
                gpu_pods_write(rows)  # type: ignore[arg-type]  -- parameters, see PageContext
            else:
                gpu_pods_upsert(rows)  # type: ignore[arg-type]
            written += len(rows)
    listed.unseen_deleted(timezone.now())
    gpu_pods_pool_fill(written_since=since)
    state.pods_listed(by_node, version)
    log.info(
        "listed pods at resourceVersion %s: %d GPU pods, %d rows written",
        version,
        len(listed.seen),
        written,
    )


def _relist(resource: str, state: WatchState, leading: threading.Event) -> None:
    if resource == "nodes":
        nodes_relist(state)
        return
    # The nodes first: a new pod's row takes its node's pool.
    while not state.versions.get("nodes"):
        if not leading.is_set():
            raise LeaseLost("stopped before the nodes were listed")
        time.sleep(0.05)
    pods_relist(state, leading)


def _apply(resource: str, state: WatchState, event: dict[str, object]) -> None:
    raw = event.get("object")
    if not isinstance(raw, dict):
        return
    version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
    kind = str(event.get("type"))
    if kind != "BOOKMARK":
        if resource == "nodes":
            state.node_event(kind, raw)
        else:
            state.pod_event(kind, raw, timezone.now())
    if version:
        state.versions[resource] = version


def follow(resource: str, state: WatchState, leading: threading.Event) -> None:
    """One resource's stream, for as long as this process leads: list when there is no
    resourceVersion to start from (or a re-list is wanted), then watch and resume."""
    backoff = 0.5
    while leading.is_set():
        try:
            if resource in state.relist or not state.versions.get(resource):
                state.relist.discard(resource)
                _relist(resource, state, leading)
                state.contact.answered(resource)
            for event in watch_events(resource, state.versions[resource], state.streams):
                state.contact.answered(resource)
                if not leading.is_set() or resource in state.relist:
                    break
                _apply(resource, state, event)
            else:
                state.contact.answered(resource)  # the server ended the stream on time
            backoff = 0.5
        except LeaseLost:
            return
        except WatchExpired as exc:
            log.info("%s: listing again", exc)
            state.contact.answered(resource)  # the server answered: 410, list again
            state.relist.add(resource)
        except Exception as exc:  # noqa: BLE001 -- KubeError, or the database away: resume later
            if isinstance(exc, KubeUnavailable) and resource in state.relist:
                continue  # the stream was ended on purpose, for a re-list: list at once
            if isinstance(exc, KubeError):
                state.contact.failed(resource, str(exc))
            level = logging.WARNING if isinstance(exc, KubeError) else logging.ERROR
            log.log(level, "watching %s: %s; resuming in %.1fs", resource, exc, backoff)
            close_old_connections()
            time.sleep(backoff * (0.5 + random.random()))  # noqa: S311 -- jitter
            backoff = min(BACKOFF_MAX, backoff * 2)
    close_old_connections()


@dataclass
class Leader:
    """The loop of the process that holds the lease: flush, renew, and purge."""

    holder: str
    stop: threading.Event
    state: WatchState = field(default_factory=WatchState)
    leading: threading.Event = field(default_factory=threading.Event)
    renewed: float = 0.0
    flushed: float = 0.0
    lost: threading.Event = field(default_factory=threading.Event)
    heartbeat: Heartbeat = field(default_factory=lambda: process_heartbeat())

    def run(self) -> None:
        self.leading.set()
        self.renewed = time.monotonic()
        try:
            threads = [("lease", self.keep, ()), ("dra", self.dra, ())]
            threads += [(f"watch-{r}", follow, (r, self.state, self.leading)) for r in RESOURCES]
            for name, target, args in threads:
                threading.Thread(target=target, args=args, daemon=True, name=name).start()
            while not self.stop.is_set():
                self.state.changed.wait(FLUSH_SECONDS)
                self.heartbeat.renew()  # from this loop: a hung flush stops it
                self.still_leading()
                if self.state.changed.is_set():
                    self.stop.wait(max(0.0, self.flushed + FLUSH_SECONDS - time.monotonic()))
                    self.flush()
            self.flush()
        finally:
            self.leading.clear()

    def keep(self) -> None:
        """The lease's own thread: renew every third of its length, whatever the flushes
        are doing; note a wanted re-list; give up when someone else holds it."""
        seconds = settings.INVENTORY_LEASE_SECONDS
        while self.leading.is_set() and not self.stop.wait(seconds / 3):
            try:
                if not lease_renew(self.holder, seconds, self.state.contact.now()):
                    self.lost.set()
                    self.leading.clear()
                    break
                self.renewed = time.monotonic()
                if relist_taken(self.holder):
                    self.state.relist |= {"nodes", "pods"}
                    ended = self.state.streams.interrupt("nodes", "pods")
                    log.info(
                        "a full sync asked for a re-list; watch streams ended for it: %s",
                        ", ".join(ended) or "none open",
                    )
            except Exception as exc:  # noqa: BLE001 -- the database busy or away: try again
                log.warning("renewing the inventory lease: %s", exc)
                close_old_connections()
        close_old_connections()

    def dra(self) -> None:
        """DRA's objects, listed again every DRA_SYNC_SECONDS while leading (not watched:
        they are few, and the fit check is their only reader)."""
        while self.leading.is_set() and not self.stop.is_set():
            dra_sync_logged()
            close_old_connections()
            if self.stop.wait(settings.DRA_SYNC_SECONDS):
                break

    def still_leading(self) -> None:
        if self.lost.is_set():
            raise LeaseLost("the inventory lease was taken over")
        if time.monotonic() - self.renewed > settings.INVENTORY_LEASE_SECONDS:
            raise LeaseLost("the lease was not renewed in time: not writing")

    def flush(self) -> None:
        batch = self.state.take()
        if len(batch) or batch.present is not None:
            started = time.monotonic()
            flush(batch, timezone.now(), self.still_leading)
            if len(batch) >= LOGGED_BATCH:
                log.info(
                    "wrote %d nodes (%d gone, %d with their pods only), %d pods in %.2fs",
                    len(batch.nodes),
                    len(batch.gone),
                    len(batch.pods_only),
                    len(batch.pod_rows),
                    time.monotonic() - started,
                )
        self.flushed = time.monotonic()


def process_heartbeat() -> Heartbeat:
    """The watcher's liveness file (HEARTBEAT_FILE; none when unset)."""
    return Heartbeat(settings.HEARTBEAT_FILE, settings.HEARTBEAT_SECONDS)


def watch_inventory(stop: threading.Event) -> None:
    """Wait for the lease, then lead until `stop` is set or the lease is lost (then wait
    again); give the lease back on the way out."""
    holder = holder_name("watcher")
    seconds = settings.INVENTORY_LEASE_SECONDS
    log.info("inventory watcher %s starting", holder)
    # Building the client imports its generated API classes (seconds on a busy machine):
    # done before taking the lease, not while holding it.
    core_api()
    # What start-up built (Django, the client's hundreds of generated classes) lives as long
    # as the process: out of the cyclic collector's sight, a full collection no longer walks
    # it each time a listing's objects pile up. At 15,000 nodes the collections cost 10 of
    # the initial sync's 26 s of CPU.
    gc.freeze()
    waiting = False
    heartbeat = process_heartbeat()
    try:
        while not stop.is_set():
            try:
                if lease_acquire(holder, seconds):
                    log.info("%s holds the inventory lease", holder)
                    waiting = False
                    Leader(holder, stop, heartbeat=heartbeat).run()
                    continue
                if not waiting:
                    log.info("waiting for the inventory lease held by %s", lease_holder())
                    waiting = True
                heartbeat.renew()  # a watcher waiting its turn is alive too
                stop.wait(seconds / 3)
            except LeaseLost as exc:
                log.warning("%s: %s", holder, exc)
            except Exception:
                log.exception("the inventory watcher failed; starting again")
                close_old_connections()
                stop.wait(2.0)
    finally:
        lease_release(holder)
        log.info("inventory watcher %s stopped", holder)
