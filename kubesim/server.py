"""The HTTP API server: routing, authentication, the verbs, watch, audit log, faults."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubesim import discovery, errors, openapi, patching
from kubesim.cluster import KINDS, Cluster, GpuOverride
from kubesim.errors import ApiError
from kubesim.faults import Faults
from kubesim.selectors import field_selector, label_selector
from kubesim.store import Entry

API_VERSIONS = {
    "nodes": "v1",
    "pods": "v1",
    "events": "v1",
    "namespaces": "v1",
    "poddisruptionbudgets": "policy/v1",
    "daemonsets": "apps/v1",
    "eventsv1": "events.k8s.io/v1",
}
NAMESPACED = {"pods", "events", "poddisruptionbudgets", "daemonsets", "eventsv1"}
# Resources of the named API groups: (group/version, resource in the URL) -> stored resource.
GROUP_RESOURCES = {
    ("apps/v1", "daemonsets"): "daemonsets",
    ("events.k8s.io/v1", "events"): "eventsv1",
}
READ_ONLY = {"daemonsets", "eventsv1"}  # served for reading: their writers are in kubesim
PATCH_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}

_CORE = re.compile(
    r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[a-z]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[a-z]+))?)?$"
)
_GROUPED = re.compile(
    r"^/apis/(?P<gv>apps/v1|events\.k8s\.io/v1)(?:/namespaces/(?P<ns>[^/]+))?"
    r"/(?P<resource>[a-z]+)(?:/(?P<name>[^/]+))?$"
)
_POLICY = re.compile(
    r"^/apis/policy/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>poddisruptionbudgets)"
    r"(?:/(?P<name>[^/]+))?$"
)


@dataclass(frozen=True)
class User:
    name: str
    read_only: bool


@dataclass
class Request:
    verb: str
    resource: str
    namespace: str | None
    name: str | None
    subresource: str | None
    query: dict[str, str]

    def object_ref(self) -> dict[str, Any]:
        ref: dict[str, Any] = {
            "resource": self.resource,
            "apiVersion": API_VERSIONS.get(self.resource, "v1"),
        }
        group = api_group(self.resource)
        if group:
            ref["apiGroup"] = group
            ref["resource"] = _URL_RESOURCE.get(self.resource, self.resource)
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.name:
            ref["name"] = self.name
        if self.subresource:
            ref["subresource"] = self.subresource
        return ref


@dataclass
class ApiServer:
    cluster: Cluster
    tokens: dict[str, User]
    audit_path: Path | None = None
    faults: Faults = field(default_factory=Faults)
    server_address: str = "127.0.0.1:6443"

    def __post_init__(self) -> None:
        self._audit_lock = threading.Lock()
        self._audit_file = None
        if self.audit_path is not None:
            self.audit_path.parent.mkdir(parents=True, exist_ok=True)
            self._audit_file = self.audit_path.open("a", buffering=1)

    def audit(
        self,
        handler: BaseHTTPRequestHandler,
        user: User | None,
        verb: str,
        request: Request | None,
        code: int,
        received: datetime,
    ) -> None:
        if self._audit_file is None:
            return
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": handler.path,
            "verb": verb,
            "user": {
                "username": user.name if user else "system:anonymous",
                "groups": ["system:authenticated"] if user else ["system:unauthenticated"],
            },
            "sourceIPs": [handler.client_address[0]],
            "userAgent": handler.headers.get("User-Agent", ""),
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": received.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "stageTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        if request is not None:
            event["objectRef"] = request.object_ref()
        line = json.dumps(event, separators=(",", ":"))
        with self._audit_lock:
            self._audit_file.write(line + "\n")


def verb_of(method: str, name: str | None, query: dict[str, str]) -> str:
    if method == "GET":
        if query.get("watch") in ("true", "1"):
            return "watch"
        return "get" if name else "list"
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }.get(method, method.lower())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubesim"
    # Headers and body go out in two writes; with Nagle's algorithm on, the body waits for
    # the client's delayed ACK and every answer after the first on a connection takes 40 ms.
    disable_nagle_algorithm = True
    api: ApiServer  # set on the subclass made by make_server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # --- plumbing ---
    def _body(self) -> bytes:
        return self._raw_body

    def _json_body(self) -> Any:
        raw = self._body()
        try:
            return json.loads(raw or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from None

    def _send(
        self,
        code: int,
        payload: bytes,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        # The audit line is written before the answer leaves, so a client that reads the log
        # right after its response finds its request there.
        self._record(code)
        self.wfile.write(payload)

    def _record(self, code: int) -> None:
        if self._audited:
            return
        self._audited = True
        self.api.audit(self, self._who, self._verb, self._request, code, self._received)

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self._send(code, json.dumps(body, separators=(",", ":")).encode(), headers)

    def _send_error(self, error: ApiError) -> None:
        self._send_json(error.code, error.status(), error.headers)

    def _user(self) -> User | None:
        header = self.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return None
        return self.api.tokens.get(header[len("Bearer ") :].strip())

    # --- the request ---
    def _serve(self, method: str) -> None:
        self._received = datetime.now(UTC)
        self._audited = False
        self._who: User | None = None
        self._request: Request | None = None
        self._verb = method.lower()  # non-resource requests are audited with the HTTP verb
        # Read the body before any answer, errors included: what is left unread on a
        # keep-alive connection would be parsed as the next request.
        length = int(self.headers.get("Content-Length") or 0)
        self._raw_body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        code = 500
        try:
            if path in ("/version", "/healthz", "/livez", "/readyz"):
                code = 200
                if path == "/version":
                    self._send_json(200, discovery.VERSION)
                else:
                    self._send(200, b"ok", content_type="text/plain")
                return
            user = self._who = self._user()
            if user is None:
                raise errors.unauthorized()
            if path.startswith("/kubesim/"):
                code = self._control(method, path, user)
                return
            if path.startswith("/openapi/") and method == "GET":
                code = self._openapi(path, query)
                return
            request = self._request = self._route(method, path, query)
            if request is None:
                code = self._discovery(path)
                return
            verb = self._verb = request.verb
            if user.read_only and verb not in ("get", "list", "watch"):
                raise errors.forbidden(
                    user.name,
                    verb,
                    _URL_RESOURCE.get(request.resource, request.resource)
                    if not request.subresource
                    else f"{request.resource}/{request.subresource}",
                    request.name,
                    request.namespace,
                    api_group(request.resource),
                )
            if self._inject_fault(verb, request.resource):
                code = 0
                return
            code = self._dispatch(method, request)
        except ApiError as error:
            code = error.code
            self._send_error(error)
        except (BrokenPipeError, ConnectionResetError):
            code = 499
        finally:
            if code:
                self._record(code)

    def _inject_fault(self, verb: str, resource: str) -> bool:
        faults = self.api.faults
        if faults.latency_ms:
            time.sleep(faults.latency_ms / 1000)
        outcome = faults.decide(verb, resource)
        if outcome is None:
            return False
        if outcome == "drop":
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return True
        if outcome == 429:
            raise errors.too_many_requests(1)
        if outcome == 503:
            raise errors.service_unavailable()
        raise errors.internal_error("injected fault")

    def _route(self, method: str, path: str, query: dict[str, str]) -> Request | None:
        match = _CORE.match(path) or _POLICY.match(path) or _GROUPED.match(path)
        if not match:
            if path.startswith(("/api", "/apis", "/openapi")) and path not in (
                "/api",
                "/api/v1",
                "/apis",
                *(f"/apis/{group}" for group in discovery.GROUPS),
                *(f"/apis/{gv}" for gv in discovery.GROUP_RESOURCES),
            ):
                raise ApiError(
                    404, "NotFound", "the server could not find the requested resource", {}
                )
            return None
        ns, resource, name, sub, gv = (
            match.groupdict().get(k) for k in ("ns", "resource", "name", "sub", "gv")
        )
        if gv:
            resource = GROUP_RESOURCES.get((gv, resource or ""), "")
        if resource not in API_VERSIONS and not (resource == "namespaces" and ns is None):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if ns and resource not in NAMESPACED:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        verb = verb_of(method, name, query)
        if sub == "eviction":
            verb = "create"
        return Request(verb, resource, ns, name, sub, query)

    def _discovery(self, path: str) -> int:
        documents: dict[str, Any] = {
            "/api": discovery.api_versions(self.api.server_address),
            "/api/v1": discovery.CORE_RESOURCES,
            "/apis": discovery.api_groups(),
            **{f"/apis/{group}": discovery.api_group(group) for group in discovery.GROUPS},
            **{f"/apis/{gv}": doc for gv, doc in discovery.GROUP_RESOURCES.items()},
        }
        if path not in documents:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        self._send_json(200, documents[path])
        return 200

    def _openapi(self, path: str, query: dict[str, str]) -> int:
        """The OpenAPI documents: v2 (JSON, or protobuf when asked) and v3 by group version."""
        if path == "/openapi/v3":
            self._send_json(200, openapi.v3_index())
            return 200
        if path == "/openapi/v2":
            wants_proto = "protobuf" in self.headers.get("Accept", "")
            rendered = openapi.v2_proto() if wants_proto else openapi.v2_json()
            content_type = openapi.V2_PROTOBUF if wants_proto else "application/json"
            cache = "no-cache, private"
        else:
            group_version = openapi.v3_paths().get(path.removeprefix("/openapi/v3/"))
            if group_version is None:
                raise ApiError(
                    404, "NotFound", "the server could not find the requested resource", {}
                )
            rendered = openapi.v3_document(group_version)
            content_type = "application/json"
            # A URL with the document's hash names one version of it for ever.
            immutable = query.get("hash") == rendered.etag
            cache = "public, immutable" if immutable else "no-cache, private"
        etag = f'"{rendered.etag}"'
        headers = {"ETag": etag, "Cache-Control": cache, "Vary": "Accept"}
        if self.headers.get("If-None-Match") == etag:
            self._send(304, b"", headers)
            return 304
        self._send(200, rendered.body, headers, content_type=content_type)
        return 200

    # --- verbs ---
    def _dispatch(self, method: str, request: Request) -> int:
        if request.resource == "namespaces":
            return self._namespaces(request)
        if request.subresource == "eviction":
            return self._evict(request)
        if request.subresource not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if request.resource in READ_ONLY and request.verb not in ("get", "list", "watch"):
            raise errors.method_not_allowed(method)
        if request.resource == "daemonsets" and self.api.cluster.daemonsets is not None:
            self.api.cluster.daemonsets.sync_status()
        if request.verb == "watch":
            return self._watch(request)
        if request.verb == "list":
            return self._list(request)
        if request.verb == "get":
            entry = self._store.get(request.resource, request.namespace, request.name or "")
            if discovery.wants_table(self.headers.get("Accept", "")):
                meta = {"resourceVersion": entry.obj["metadata"]["resourceVersion"]}
                self._send_json(200, discovery.table(request.resource, [entry.obj], meta))
            else:
                self._send_object(200, entry, request.resource)
            return 200
        dry_run = request.query.get("dryRun") == "All"
        if request.verb == "create":
            return self._create(request, dry_run)
        if request.verb == "update":
            return self._update(request, dry_run)
        if request.verb == "patch":
            return self._patch(request, dry_run)
        if request.verb == "delete":
            gone = self.api.cluster.store.delete(
                request.resource, request.namespace, request.name or "", dry_run=dry_run
            )
            self._send_object(200, gone, request.resource)
            return 200
        raise errors.method_not_allowed(method)

    @property
    def _store(self):  # type: ignore[no-untyped-def]
        return self.api.cluster.store

    def _send_object(self, code: int, entry: Entry, resource: str) -> None:
        if resource == "poddisruptionbudgets":
            self._send_json(code, self.api.cluster.pdb_with_status(entry))
        else:
            self._send(code, entry.raw)

    def _list(self, request: Request) -> int:
        query = request.query
        labels = label_selector(query.get("labelSelector"))
        fields = field_selector(request.resource, query.get("fieldSelector"))
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        if token:
            snapshot_id, rv, offset, entries = self._store.resume(token)
        else:
            node = _node_equality(query.get("fieldSelector"))
            if request.resource == "pods" and node is not None:
                rv, everything = self._store.pods_on(node)
                if request.namespace:
                    everything = [
                        e
                        for e in everything
                        if e.obj["metadata"].get("namespace") == request.namespace
                    ]
            else:
                rv, everything = self._store.list(request.resource, request.namespace)
            entries = [e for e in everything if labels(e.obj) and fields(e.obj)]
            snapshot_id, offset = "", 0
        page = entries[offset : offset + limit] if limit else entries[offset:]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        end = offset + len(page)
        if limit and end < len(entries):
            snapshot_id = snapshot_id or self._store.save_snapshot(rv, entries)
            meta["continue"] = self._store.continue_token(snapshot_id, rv, end)
            meta["remainingItemCount"] = len(entries) - end
        if discovery.wants_table(self.headers.get("Accept", "")):
            objects = [e.obj for e in page]
            self._send_json(200, discovery.table(request.resource, objects, meta))
            return 200
        kind = KINDS.get(request.resource, "Namespace") + "List"
        if request.resource == "poddisruptionbudgets":
            items = b",".join(
                json.dumps(self.api.cluster.pdb_with_status(e)).encode() for e in page
            )
        else:
            items = b",".join(e.raw for e in page)
        head = json.dumps(
            {"kind": kind, "apiVersion": API_VERSIONS[request.resource], "metadata": meta}
        )[:-1].encode()
        self._send(200, head + b',"items":[' + items + b"]}")
        return 200

    def _namespaces(self, request: Request) -> int:
        if request.verb not in ("list", "get"):
            raise errors.method_not_allowed(request.verb)
        names = sorted(
            {
                e.obj["metadata"].get("namespace", "default")
                for e in self._store.list("pods", None)[1]
            }
            | {"default", "kube-system"}
        )
        items = [
            {
                "metadata": {"name": n, "creationTimestamp": "2026-01-01T00:00:00Z"},
                "status": {"phase": "Active"},
            }
            for n in names
        ]
        if request.name:
            found = next((i for i in items if i["metadata"]["name"] == request.name), None)
            if found is None:
                raise errors.not_found("namespaces", request.name)
            self._send_json(200, {"kind": "Namespace", "apiVersion": "v1", **found})
        else:
            self._send_json(
                200,
                {
                    "kind": "NamespaceList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self._store.rv)},
                    "items": items,
                },
            )
        return 200

    def _prepare(self, request: Request, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        body = copy.deepcopy(body)
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if request.resource in NAMESPACED:
            if (
                meta.get("namespace")
                and request.namespace
                and meta["namespace"] != request.namespace
            ):
                raise errors.bad_request(
                    "the namespace of the provided object does not match "
                    "the namespace sent on the request"
                )
            meta["namespace"] = request.namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        body["kind"] = KINDS[request.resource]
        body["apiVersion"] = API_VERSIONS[request.resource]
        return body

    def _create(self, request: Request, dry_run: bool) -> int:
        if request.name:
            raise errors.method_not_allowed("POST")
        body = self._prepare(request, self._json_body())
        if not body["metadata"].get("name") and body["metadata"].get("generateName"):
            body["metadata"]["name"] = body["metadata"]["generateName"] + uuid.uuid4().hex[:5]
        self.api.cluster.validate(request.resource, body)
        if request.resource == "pods":
            created = self.api.cluster.create_pod(body, dry_run=dry_run)
        else:
            created = self._store.create(request.resource, body, dry_run=dry_run)
        self._send_object(201, created, request.resource)
        return 201

    def _update(self, request: Request, dry_run: bool) -> int:
        body = self._prepare(request, self._json_body())
        name = body["metadata"].get("name")
        if name != request.name:
            raise errors.bad_request(
                f"the name of the object ({name}) does not match the name "
                f"on the URL ({request.name})"
            )
        with self._store.lock:
            self._concurrent_writer(request)
            current = self._store.get(request.resource, request.namespace, request.name or "")
            body = self._keep_other_half(request, current.obj, body)
            self.api.cluster.validate(request.resource, body)
            expected = body["metadata"].get("resourceVersion") or None
            stored = self._store.replace(
                request.resource, body, expected_rv=expected, dry_run=dry_run
            )
        self._send_object(200, stored, request.resource)
        return 200

    def _patch(self, request: Request, dry_run: bool) -> int:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patch_type = PATCH_TYPES.get(content_type)
        if patch_type is None:
            raise errors.unsupported_media_type(content_type)
        patch = self._json_body()
        # The whole read-patch-write holds the store lock, as the real server retries a patch
        # without a precondition internally: only a client's own resourceVersion can conflict.
        with self._store.lock:
            self._concurrent_writer(request)
            current = self._store.get(request.resource, request.namespace, request.name or "")
            if patch_type == "merge":
                if not isinstance(patch, dict):
                    raise errors.bad_request("merge patch must be a JSON object")
                patched = patching.json_merge_patch(current.obj, patch)
            elif patch_type == "strategic":
                if not isinstance(patch, dict):
                    raise errors.bad_request("strategic merge patch must be a JSON object")
                patched = patching.strategic_merge_patch(
                    current.obj, patch, KINDS[request.resource]
                )
            else:
                patched = patching.json_patch(current.obj, patch)
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise errors.bad_request("the patch removed the object's metadata")
            meta = patched["metadata"]
            if meta.get("name") != request.name:
                raise errors.bad_request("metadata.name: Invalid value: the name cannot be changed")
            if request.namespace and meta.get("namespace") != request.namespace:
                raise errors.bad_request("metadata.namespace: the namespace cannot be changed")
            patched = self._keep_other_half(request, current.obj, patched)
            self.api.cluster.validate(request.resource, patched)
            expected = meta.get("resourceVersion") or None
            stored = self._store.replace(
                request.resource, patched, expected_rv=expected, dry_run=dry_run
            )
        self._send_object(200, stored, request.resource)
        return 200

    @staticmethod
    def _keep_other_half(
        request: Request, current: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        """The main resource cannot change status; the status subresource changes only that."""
        if request.resource not in ("nodes", "pods"):
            return new
        if request.subresource == "status":
            return {
                **current,
                "status": new.get("status"),
                "metadata": {
                    **current["metadata"],
                    "resourceVersion": new["metadata"].get("resourceVersion"),
                },
            }
        result = dict(new)
        if "status" in current:
            result["status"] = current["status"]
        else:
            result.pop("status", None)
        return result

    def _concurrent_writer(self, request: Request) -> None:
        """Fault: another writer changes the node between the client's read and this write."""
        if request.resource != "nodes" or not self.api.faults.take_conflict(request.name or ""):
            return
        current = self._store.get("nodes", None, request.name or "")
        bumped = copy.deepcopy(current.obj)
        annotations = bumped["metadata"].setdefault("annotations", {})
        annotations["kubesim.io/concurrent-writer"] = str(time.time_ns())
        self._store.replace("nodes", bumped, expected_rv=None)

    def _evict(self, request: Request) -> int:
        if self.command != "POST" or request.resource != "pods":
            raise errors.method_not_allowed(self.command)
        body = self._json_body() or {}
        dry_run = request.query.get("dryRun") == "All" or "All" in (
            (body.get("deleteOptions") or {}).get("dryRun") or []
        )
        self.api.cluster.evict(request.namespace or "default", request.name or "", dry_run=dry_run)
        self._send_json(
            201,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
        )
        return 201

    # --- watch: a chunked stream of JSON events ---
    def _watch(self, request: Request) -> int:
        labels = label_selector(request.query.get("labelSelector"))
        fields = field_selector(request.resource, request.query.get("fieldSelector"))
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        store = self._store

        def matches(entry: Entry | None) -> bool:
            return (
                entry is not None
                and labels(entry.obj)
                and fields(entry.obj)
                and (
                    request.namespace is None
                    or entry.obj["metadata"].get("namespace") == request.namespace
                )
            )

        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        start = request.query.get("resourceVersion")
        initial: list[bytes] = []
        with store.lock:
            if start in (None, "", "0"):
                rv, entries = store.list(request.resource, request.namespace)
                initial = [_event_line("ADDED", e.raw) for e in entries if matches(e)]
                last = rv
            else:
                last = int(start)
                if last < store.oldest_rv:
                    status = errors.gone(f"too old resource version: {last} ({store.oldest_rv})")
                    initial = [_event_line("ERROR", json.dumps(status.status()).encode())]
                    last = -1
        try:
            for line in initial:
                self._chunk(line)
            while last >= 0 and time.monotonic() < deadline:
                with store.lock:
                    if store.rv <= last:
                        store.changed.wait(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
                    pending = [
                        e for e in store.events_since(last) if e.resource == request.resource
                    ]
                    last = store.rv
                for event in pending:
                    now_in, was_in = matches(event.new), matches(event.old)
                    if event.type == "MODIFIED" and now_in != was_in:
                        kind = "ADDED" if now_in else "DELETED"
                    elif now_in or (event.type == "DELETED" and was_in):
                        kind = event.type
                    else:
                        continue
                    self._chunk(_event_line(kind, event.new.raw))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            return 499
        return 200

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # --- control endpoints for tests, the demo and benchmarks ---
    def _control(self, method: str, path: str, user: User) -> int:
        if user.read_only:
            raise errors.forbidden(user.name, method.lower(), "kubesim", None, None)
        cluster = self.api.cluster
        if path == "/kubesim/faults":
            if method == "POST":
                self.api.faults.configure(self._json_body() or {})
            self._send_json(200, self.api.faults.describe())
            return 200
        if path == "/kubesim/gpus" and method == "POST":
            # {"node": N, "gpu": 0 | [0, 1] | "all", "util": float | null, "xid": int | null}
            body = self._json_body() or {}
            node = str(body["node"])
            with cluster.store.lock:
                node_obj = cluster.store.get("nodes", None, node).obj
                count = int(node_obj["status"]["allocatable"].get("nvidia.com/gpu", "0"))
                wanted = body.get("gpu", 0)
                indexes = (
                    range(count)
                    if wanted == "all"
                    else wanted
                    if isinstance(wanted, list)
                    else [wanted]
                )
                for index in indexes:
                    override = cluster.gpu_overrides.setdefault((node, int(index)), GpuOverride())
                    if "util" in body:
                        override.util = None if body["util"] is None else float(body["util"])
                    if "xid" in body:
                        override.xid = None if body["xid"] is None else int(body["xid"])
            self._send_json(200, {"node": node, "gpus": list(indexes)})
            return 200
        if path == "/kubesim/exporter" and method == "POST":
            body = self._json_body() or {}
            node = str(body["node"])
            if body.get("enabled", True):
                cluster.exporter_disabled.discard(node)
            else:
                cluster.exporter_disabled.add(node)
            self._send_json(200, {"node": node, "enabled": node not in cluster.exporter_disabled})
            return 200
        if path == "/kubesim/schedule" and method == "POST":
            self._send_json(200, {"bound": cluster.schedule_pending()})
            return 200
        raise errors.not_found("kubesim", path)


_URL_RESOURCE = {"eventsv1": "events"}


def api_group(resource: str) -> str:
    """The API group a stored resource is served in ("" for the core group)."""
    version = API_VERSIONS.get(resource, "v1")
    return version.rsplit("/", 1)[0] if "/" in version else ""


def _node_equality(selector: str | None) -> str | None:
    """X when the field selector requires spec.nodeName=X (the index can answer it)."""
    for term in (selector or "").split(","):
        match = re.match(r"^\s*spec\.nodeName\s*==?\s*(\S+)\s*$", term)
        if match:
            return match.group(1)
    return None


def _event_line(kind: str, raw: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512
    allow_reuse_address = True


def make_server(api: ApiServer, host: str, port: int) -> Server:
    handler = type("BoundHandler", (Handler,), {"api": api})
    return Server((host, port), handler)
