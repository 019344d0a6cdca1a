"""Watch streams as the API server's watch cache serves them.

- resume from a resourceVersion, or 410 `too old resource version` as an ERROR event;
- `sendInitialEvents=true` (WatchList): the current objects as ADDED, then a BOOKMARK
  annotated `k8s.io/initial-events-end: "true"` at the list's resourceVersion;
- `allowWatchBookmarks=true`: a BOOKMARK about every minute and two seconds before the
  watch's timeout, each an empty object of the kind carrying only a resourceVersion;
- `Accept: application/json;as=Table`: each event's object is a one-row Table, column
  definitions only on the first (`kubectl get -w` prints one header), rows carrying the
  object as `includeObject` says;
- with a label or field selector, an object that stops matching is a DELETED event carrying
  the object as it last matched, one that starts matching an ADDED.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesim import discovery, errors
from kubesim.admission import NODE_STATUS_ZERO
from kubesim.store import entry

if TYPE_CHECKING:
    from kubesim.store import Entry, Store

BOOKMARK_FREQUENCY = 60.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# A bookmark's object is the kind's zero value with only a resourceVersion: Go serialises
# its non-pointer structs and non-omitempty fields too.
EMPTY_BODIES: dict[str, dict[str, Any]] = {
    "pods": {"spec": {"containers": None}, "status": {}},
    "nodes": {"spec": {}, "status": NODE_STATUS_ZERO},
    "poddisruptionbudgets": {
        "spec": {},
        "status": {
            "disruptionsAllowed": 0,
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "expectedPods": 0,
        },
    },
}


def bookmark(resource: str, kind: str, api_version: str, rv: int, *, initial_end: bool) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    body = {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": meta,
        **EMPTY_BODIES.get(resource, {}),
    }
    return event_line("BOOKMARK", json.dumps(body, separators=(",", ":")).encode())


def event_line(kind: str, raw: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


class TableEncoder:
    """Objects as one-row Tables: headers on the first event only."""

    def __init__(self, resource: str, include_object: str) -> None:
        self.resource = resource
        self.include_object = include_object
        self.headers_sent = False

    def encode(self, entry: Entry) -> bytes:
        meta = {"resourceVersion": entry.obj["metadata"].get("resourceVersion", "")}
        table = discovery.table(self.resource, [entry.obj], meta)
        rows_with_objects(table, [entry.obj], self.include_object)
        if self.headers_sent:
            table["columnDefinitions"] = None
        self.headers_sent = True
        return json.dumps(table, separators=(",", ":")).encode()


def rows_with_objects(table: dict[str, Any], objects: list[dict[str, Any]], include: str) -> None:
    """Each row's object as includeObject asks (Metadata is what discovery.table built)."""
    for row, obj in zip(table["rows"], objects, strict=True):
        if include == "None":
            row["object"] = None
        elif include == "Object":
            row["object"] = obj


class WatchStream:
    def __init__(
        self,
        store: Store,
        resource: str,
        kind: str,
        api_version: str,
        matches: Callable[[Entry | None], bool],
        write: Callable[[bytes], None],
    ) -> None:
        self.store = store
        self.resource = resource
        self.kind = kind
        self.api_version = api_version
        self.matches = matches
        self.write = write
        self.encode: Callable[[Entry], bytes] = lambda e: e.raw

    def run(
        self,
        *,
        resource_version: str,
        send_initial: bool | None,
        bookmarks: bool,
        timeout: float,
        namespace: str | None,
    ) -> None:
        store = self.store
        started = time.monotonic()
        deadline = started + timeout
        initial: list[bytes] = []
        with store.lock:
            if send_initial is False and resource_version in ("", "0"):
                last = store.rv
            elif send_initial or resource_version in ("", "0"):
                last, entries = store.list(self.resource, namespace)
                initial = [event_line("ADDED", self.encode(e)) for e in entries if self.matches(e)]
                if send_initial and bookmarks:
                    initial.append(
                        bookmark(self.resource, self.kind, self.api_version, last, initial_end=True)
                    )
            else:
                last = int(resource_version)
                if last < store.oldest_rv:
                    status = errors.gone(f"too old resource version: {last} ({store.oldest_rv})")
                    self.write(event_line("ERROR", json.dumps(status.status()).encode()))
                    return
        for line in initial:
            self.write(line)
        next_bookmark = self._next_bookmark(time.monotonic(), deadline)
        while time.monotonic() < deadline:
            with store.lock:
                if store.rv <= last:
                    wait = min(1.0, max(0.0, deadline - time.monotonic()))
                    if bookmarks:
                        wait = min(wait, max(0.0, next_bookmark - time.monotonic()))
                    store.changed.wait(timeout=wait)
                pending = [e for e in store.events_since(last) if e.resource == self.resource]
                last = store.rv
            for event in pending:
                line = self._line(event)
                if line is not None:
                    self.write(line)
            now = time.monotonic()
            if bookmarks and now >= next_bookmark:
                self.write(
                    bookmark(self.resource, self.kind, self.api_version, last, initial_end=False)
                )
                next_bookmark = self._next_bookmark(now, deadline)

    @staticmethod
    def _next_bookmark(now: float, deadline: float) -> float:
        """About every minute, and two seconds before the watch times out."""
        heartbeat = now + BOOKMARK_FREQUENCY
        before_timeout = deadline - 2.0
        if before_timeout < heartbeat:
            return before_timeout if before_timeout > now else float("inf")
        return heartbeat

    def _line(self, event: Any) -> bytes | None:
        now_in, was_in = self.matches(event.new), self.matches(event.old)
        if event.type == "MODIFIED" and now_in != was_in:
            if not now_in:
                return event_line("DELETED", self.encode(left_selector(event)))
            kind = "ADDED"
        elif now_in or (event.type == "DELETED" and was_in):
            kind = event.type
        else:
            return None
        return event_line(kind, self.encode(event.new))


def left_selector(event: Any) -> Entry:
    """The watch cache answers an object that leaves the selector with a DELETED event
    carrying the object as it was (it still matched then), at the change's
    resourceVersion (cacheWatcher.convertToWatchEvent)."""
    old = event.old.obj
    meta = {**old["metadata"], "resourceVersion": str(event.rv)}
    return entry({**old, "metadata": meta})
