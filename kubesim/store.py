"""The object store: copy-on-write objects, one resourceVersion counter, an event history.

Stored objects are never mutated: a write stores a new dict and its JSON bytes, so a list
page or a watch can hold references to a consistent snapshot without copying.
"""

from __future__ import annotations

import base64
import collections
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kubesim.clock import Clock
from kubesim.errors import ApiError, already_exists, conflict, gone, not_found

EVENT_HISTORY = 200_000
SNAPSHOT_TTL = 300.0
# Kinds whose strategy keeps metadata.generation (bumped when the spec changes).
GENERATION = {"poddisruptionbudgets"}


@dataclass(frozen=True)
class Entry:
    obj: dict[str, Any]
    raw: bytes  # the object's JSON, serialised once per write


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    type: str
    resource: str
    new: Entry
    old: Entry | None


def entry(obj: dict[str, Any]) -> Entry:
    return Entry(obj, json.dumps(obj, separators=(",", ":")).encode())


def key_of(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Store:
    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._rv = itertools.count(1000)
        self.rv = next(self._rv)
        self.objects: dict[str, dict[str, Entry]] = collections.defaultdict(dict)
        self.events: collections.deque[WatchEvent] = collections.deque(maxlen=EVENT_HISTORY)
        self.oldest_rv = self.rv
        self._snapshots: dict[str, tuple[float, int, list[Entry]]] = {}
        # Sorted views, rebuilt on the first read after a write to that resource.
        self._sorted: dict[str, list[tuple[str, Entry]]] = {}
        # Pods by spec.nodeName, as the real API server's watch cache indexes them.
        self.pods_by_node: dict[str, set[str]] = collections.defaultdict(set)
        self.listeners: list[Any] = []  # callables (resource, type, new, old) after each write

    # --- reads ---
    def get(self, resource: str, namespace: str | None, name: str) -> Entry:
        found = self.objects[resource].get(key_of(namespace, name))
        if found is None:
            raise not_found(resource, name)
        return found

    def list(self, resource: str, namespace: str | None) -> tuple[int, list[Entry]]:
        with self.lock:
            ordered = self._sorted.get(resource)
            if ordered is None:
                ordered = self._sorted[resource] = sorted(self.objects[resource].items())
            if namespace:
                prefix = namespace + "/"
                chosen = [e for k, e in ordered if k.startswith(prefix)]
            else:
                chosen = [e for _, e in ordered]
            return self.rv, chosen

    def pods_on(self, node: str) -> tuple[int, list[Entry]]:
        """The pods bound to `node`, from the index (for fieldSelector=spec.nodeName=…)."""
        with self.lock:
            pods = self.objects["pods"]
            return self.rv, [pods[k] for k in sorted(self.pods_by_node.get(node, ()))]

    # --- paging: a continue token names a snapshot kept for a while ---
    def save_snapshot(self, rv: int, entries: list[Entry]) -> str:
        with self.lock:
            now = time.monotonic()
            for token, (created, _, _) in list(self._snapshots.items()):
                if now - created > SNAPSHOT_TTL:
                    del self._snapshots[token]
            snapshot_id = uuid.uuid4().hex
            self._snapshots[snapshot_id] = (now, rv, entries)
            return snapshot_id

    def continue_token(self, snapshot_id: str, rv: int, offset: int) -> str:
        raw = json.dumps({"v": "kubesim.v1", "rv": rv, "id": snapshot_id, "start": offset})
        return base64.urlsafe_b64encode(raw.encode()).decode()

    def resume(self, token: str) -> tuple[str, int, int, list[Entry]]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            snapshot_id, offset = data["id"], int(data["start"])
        except (ValueError, KeyError, TypeError):
            raise ApiError(
                400,
                "BadRequest",
                "continue key is not valid: incorrect encoded start "
                "resourceVersion (version meta.k8s.io/v1)",
            ) from None
        with self.lock:
            found = self._snapshots.get(snapshot_id)
        if found is None:
            raise gone(
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter."
            )
        _, rv, entries = found
        return snapshot_id, rv, offset, entries

    # --- writes ---
    def _next_rv(self) -> int:
        self.rv = next(self._rv)
        return self.rv

    def _record(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        self._sorted.pop(resource, None)
        if resource == "pods":
            key = key_of(new.obj["metadata"].get("namespace"), new.obj["metadata"]["name"])
            if old is not None:
                self.pods_by_node[(old.obj.get("spec") or {}).get("nodeName") or ""].discard(key)
            if type_ != "DELETED":
                self.pods_by_node[(new.obj.get("spec") or {}).get("nodeName") or ""].add(key)
        event = WatchEvent(self.rv, type_, resource, new, old)
        if len(self.events) == self.events.maxlen:
            self.oldest_rv = self.events[0].rv
        self.events.append(event)
        for listener in self.listeners:
            listener(resource, type_, new, old)
        self.changed.notify_all()

    def create(self, resource: str, obj: dict[str, Any], *, dry_run: bool = False) -> Entry:
        meta = obj["metadata"]
        key = key_of(meta.get("namespace"), meta["name"])
        with self.lock:
            if key in self.objects[resource]:
                raise already_exists(resource, meta["name"])
            obj = dict(obj)
            obj["metadata"] = {
                **meta,
                "uid": meta.get("uid") or str(uuid.uuid4()),
                "creationTimestamp": meta.get("creationTimestamp") or self.clock.rfc3339(),
                "resourceVersion": str(self.rv + 1),
            }
            if resource in GENERATION:
                obj["metadata"]["generation"] = 1
            if dry_run:
                return entry(obj)
            obj["metadata"]["resourceVersion"] = str(self._next_rv())
            stored = entry(obj)
            self.objects[resource][key] = stored
            self._record(resource, "ADDED", stored, None)
            return stored

    def replace(
        self, resource: str, obj: dict[str, Any], *, expected_rv: str | None, dry_run: bool = False
    ) -> Entry:
        """Store a new version. `expected_rv` is the client's precondition (None: unconditional)."""
        meta = obj["metadata"]
        key = key_of(meta.get("namespace"), meta["name"])
        with self.lock:
            old = self.objects[resource].get(key)
            if old is None:
                raise not_found(resource, meta["name"])
            current_rv = old.obj["metadata"]["resourceVersion"]
            if expected_rv and expected_rv != current_rv:
                raise conflict(resource, meta["name"])
            old_meta = old.obj["metadata"]
            new_meta = {
                **meta,
                "uid": old_meta["uid"],
                "creationTimestamp": old_meta["creationTimestamp"],
                "resourceVersion": current_rv,
            }
            if resource in GENERATION:
                generation = int(old_meta.get("generation") or 1)
                if old.obj.get("spec") != obj.get("spec"):
                    generation += 1
                new_meta["generation"] = generation
            obj = {**obj, "metadata": new_meta}
            if _same_content(old.obj, obj):
                return old  # a no-op write does not bump resourceVersion, as in the real server
            if dry_run:
                return entry(obj)
            new_meta["resourceVersion"] = str(self._next_rv())
            stored = entry(obj)
            self.objects[resource][key] = stored
            self._record(resource, "MODIFIED", stored, old)
            return stored

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        dry_run: bool = False,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> Entry:
        key = key_of(namespace, name)
        with self.lock:
            old = self.objects[resource].get(key)
            if old is None:
                raise not_found(resource, name)
            check_preconditions(resource, old, uid, resource_version)
            if dry_run:
                return old
            del self.objects[resource][key]
            self._next_rv()
            gone_obj = {
                **old.obj,
                "metadata": {**old.obj["metadata"], "resourceVersion": str(self.rv)},
            }
            stored = entry(gone_obj)
            self._record(resource, "DELETED", stored, old)
            return stored

    def list_at(self, resource: str, namespace: str | None, rv: int) -> list[Entry]:
        """The objects as they were at resourceVersion `rv`, rebuilt from the event history
        (as etcd serves an exact-version read from its own history)."""
        with self.lock:
            if rv < self.oldest_rv:
                raise gone("The resourceVersion for the provided list is too old.")
            state = dict(self.objects[resource])
            for event in reversed(self.events):
                if event.rv <= rv:
                    break
                if event.resource != resource:
                    continue
                meta = event.new.obj["metadata"]
                key = key_of(meta.get("namespace"), meta["name"])
                if event.old is None:
                    state.pop(key, None)
                else:
                    state[key] = event.old
        prefix = f"{namespace}/" if namespace else ""
        return [e for k, e in sorted(state.items()) if k.startswith(prefix)]

    def restore(self, rv: int, objects: dict[str, list[dict[str, Any]]]) -> None:
        """Load objects saved by a previous run (--state): no history before `rv`, as a
        restarted API server's watch cache has none."""
        with self.lock:
            for resource, items in objects.items():
                for obj in items:
                    meta = obj["metadata"]
                    stored = entry(obj)
                    self.objects[resource][key_of(meta.get("namespace"), meta["name"])] = stored
                    self._sorted.pop(resource, None)
                    if resource == "pods":
                        node = (obj.get("spec") or {}).get("nodeName") or ""
                        self.pods_by_node[node].add(key_of(meta.get("namespace"), meta["name"]))
                    for listener in self.listeners:
                        listener(resource, "ADDED", stored, None)
            self._rv = itertools.count(rv + 1)
            self.rv = self.oldest_rv = rv

    def events_since(self, rv: int) -> list[WatchEvent]:
        if rv < self.oldest_rv:
            raise gone(f"too old resource version: {rv} ({self.oldest_rv})")
        # Events are in rv order; scan from the end, as watchers are usually near the head.
        result = []
        for event in reversed(self.events):
            if event.rv <= rv:
                break
            result.append(event)
        result.reverse()
        return result


def _same_content(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return old == new


# Where the real API server keeps each kind in etcd (nodes under their old name, minions).
_ETCD_PREFIX = {"nodes": "minions", "eventsv1": "events"}


def etcd_key(resource: str, namespace: str | None, name: str) -> str:
    return f"/registry/{_ETCD_PREFIX.get(resource, resource)}/{key_of(namespace, name)}"


def check_preconditions(
    resource: str, current: Entry, uid: str | None, resource_version: str | None
) -> None:
    """Preconditions as the storage layer checks them while it writes (storage.Preconditions):
    an invalid-object StorageError on the object's etcd key, answered as a Conflict.
    A DELETE's preconditions are checked before this, in other words (termination)."""
    meta = current.obj["metadata"]
    if uid is not None and uid != meta.get("uid"):
        failed = f"UID in precondition: {uid}, UID in object meta: {meta.get('uid')}"
    elif resource_version is not None and resource_version != meta.get("resourceVersion"):
        failed = (
            f"ResourceVersion in precondition: {resource_version}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}"
        )
    else:
        return
    key = etcd_key(resource, meta.get("namespace"), meta["name"])
    raise conflict(
        resource,
        meta["name"],
        f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
        f"AdditionalErrorMsg: Precondition failed: {failed}",
    )
