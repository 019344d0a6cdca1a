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

import yaml

from kubesim import (
    admission,
    apply,
    discovery,
    errors,
    openapi,
    options,
    patching,
    protobuf,
    rbac,
    writes,
)
from kubesim.cluster import KINDS, Cluster, GpuOverride
from kubesim.errors import ApiError
from kubesim.faults import Faults
from kubesim.rbac import READ_VERBS, Attributes, Rbac
from kubesim.selectors import field_selector, label_selector
from kubesim.store import Entry, entry
from kubesim.termination import DeleteOptions
from kubesim.watch import TableEncoder, WatchStream, rows_with_objects

DRA_RESOURCES = ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates")
API_VERSIONS = {
    "nodes": "v1",
    "pods": "v1",
    "events": "v1",
    "namespaces": "v1",
    "poddisruptionbudgets": "policy/v1",
    "daemonsets": "apps/v1",
    "eventsv1": "events.k8s.io/v1",
    "resourceslices": "resource.k8s.io/v1",
    "deviceclasses": "resource.k8s.io/v1",
    "resourceclaims": "resource.k8s.io/v1",
    "resourceclaimtemplates": "resource.k8s.io/v1",
    "selfsubjectaccessreviews": "authorization.k8s.io/v1",
    "selfsubjectrulesreviews": "authorization.k8s.io/v1",
}
NAMESPACED = {
    "pods",
    "events",
    "poddisruptionbudgets",
    "daemonsets",
    "eventsv1",
    "resourceclaims",
    "resourceclaimtemplates",
}
# Resources of the named API groups: (group/version, resource in the URL) -> stored resource.
GROUP_RESOURCES = {
    ("apps/v1", "daemonsets"): "daemonsets",
    ("events.k8s.io/v1", "events"): "eventsv1",
    **{("resource.k8s.io/v1", r): r for r in DRA_RESOURCES},
}
# Served for reading: their writers are in kubesim (DRA's: the driver's classes and slices,
# seeded; no claim, since kubesim allocates none: kubesim.dra).
READ_ONLY = {"daemonsets", "eventsv1", *DRA_RESOURCES}
REVIEWS = {
    "selfsubjectaccessreviews": "SelfSubjectAccessReview",
    "selfsubjectrulesreviews": "SelfSubjectRulesReview",
}
PATCH_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
}

_CORE = re.compile(
    r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[a-z]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[a-z]+))?)?$"
)
_GROUPED = re.compile(
    r"^/apis/(?P<gv>apps/v1|events\.k8s\.io/v1|resource\.k8s\.io/v1)"
    r"(?:/namespaces/(?P<ns>[^/]+))?"
    r"/(?P<resource>[a-z]+)(?:/(?P<name>[^/]+))?$"
)
_POLICY = re.compile(
    r"^/apis/policy/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>poddisruptionbudgets)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>status))?)?$"
)
_AUTHORIZATION = re.compile(
    r"^/apis/authorization\.k8s\.io/v1/(?P<resource>selfsubjectaccessreviews|selfsubjectrulesreviews)$"
)


@dataclass(frozen=True)
class User:
    name: str
    read_only: bool
    groups: tuple[str, ...] = ()
    admin: bool = False  # in system:masters: every request allowed


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
        group = errors.GROUPS.get(self.resource)
        if group:
            ref["apiGroup"] = group
            ref["resource"] = url_resource(self.resource)
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
    rbac: Rbac | None = None  # None: the admin may do anything, the read-only token read
    workload: Any = None  # the WorkloadRunner, when a workload runs

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
                "groups": [*user.groups, "system:authenticated"]
                if user
                else ["system:unauthenticated"],
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
    # A watch's chunks go out in writes of their own; with Nagle's algorithm on, a write
    # after the first waits for the client's delayed ACK (40 ms).
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
        for warning in self._warnings:
            escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
            self.send_header("Warning", f'299 - "{escaped}"')
        # The audit line is written before the answer leaves, so a client that reads the log
        # right after its response finds its request there. Headers and body then leave in
        # one write: one TLS record and one system call, not two.
        self._record(code)
        if self.request_version == "HTTP/0.9":  # no headers at all (what end_headers does)
            self.wfile.write(payload)
            return
        self._headers_buffer.extend((b"\r\n", payload))
        self.flush_headers()

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
        self._warnings: list[str] = []
        self._verb = method.lower()  # non-resource requests are audited with the HTTP verb
        # Read the body before any answer, errors included: what is left unread on a
        # keep-alive connection would be parsed as the next request.
        length = int(self.headers.get("Content-Length") or 0)
        self._raw_body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        lists = parse_qs(parts.query, keep_blank_values=True)
        self._query_lists = lists
        query = {k: v[-1] for k, v in lists.items()}
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
            if self.headers.get("Impersonate-User") or self.headers.get("Impersonate-Group"):
                user = self._who = self._impersonate(user, method, path, request)
            if request is None:
                self._authorize_path(user, method, path)
                code = self._discovery(path)
                return
            verb = self._verb = request.verb
            self._authorize(user, request)
            if self._inject_fault(verb, request.resource):
                code = 0  # answered (and audited) already, or dropped
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

    def _authorize(self, user: User, request: Request) -> None:
        """The read-only token reads; the admin token does anything; with --rbac, a service
        account's token does what its roles allow (403 in the authorization filter's words)."""
        group = errors.GROUPS.get(request.resource, "")
        if user.admin:
            return
        if user.read_only:
            # Anyone may ask what they may do (the bootstrap role system:basic-user).
            if request.verb in READ_VERBS or request.resource in REVIEWS:
                return
            reason = ""
        else:
            allowed, reason = self._authorizer().authorize(self._attributes(user, request))
            if allowed:
                return
        raise errors.forbidden(
            user.name,
            request.verb,
            url_resource(request.resource),
            request.name,
            request.namespace,
            group,
            subresource=request.subresource,
            reason=reason,
        )

    def _impersonate(self, user: User, method: str, path: str, request: Request | None) -> User:
        """The user the Impersonate-User and Impersonate-Group headers name, when the caller
        may impersonate them (the legacy `impersonate` verb on users, serviceaccounts and
        groups; system:masters may). A refusal is worded as 1.37's constrained
        impersonation words it: the request's own verb, `impersonate-on:<mode>:<verb>`."""
        name = self.headers.get("Impersonate-User") or ""
        groups = tuple(self.headers.get_all("Impersonate-Group") or ())
        if not name:
            listed = ", ".join(f'"{g}"' for g in groups)
            raise errors.bad_request(
                f'requested &user.DefaultInfo{{Name:"", UID:"", Groups:[]string{{{listed}}}, '
                "Extra:map[string][]string(nil)} without impersonating a user name"
            )
        account = name.split(":")
        is_account = len(account) == 4 and account[:2] == ["system", "serviceaccount"]
        wanted = [
            ("serviceaccounts", account[3], account[2]) if is_account else ("users", name, ""),
            *(("groups", group, "") for group in groups),
        ]
        allowed = user.admin or (
            not user.read_only
            and all(
                self._authorizer().authorize(
                    Attributes(
                        user=user.name,
                        groups=(*user.groups, "system:authenticated"),
                        verb="impersonate",
                        resource_request=True,
                        resource=resource,
                        name=object_name,
                        namespace=namespace,
                    )
                )[0]
                for resource, object_name, namespace in wanted
            )
        )
        if not allowed:
            mode = "serviceaccount" if is_account else "user-info"
            if request is None:
                raise errors.forbidden_path(
                    user.name, f"impersonate-on:{mode}:{method.lower()}", path
                )
            raise errors.forbidden(
                user.name,
                f"impersonate-on:{mode}:{request.verb}",
                url_resource(request.resource),
                request.name,
                request.namespace,
                errors.GROUPS.get(request.resource, ""),
                subresource=request.subresource,
            )
        if is_account:
            groups = ("system:serviceaccounts", f"system:serviceaccounts:{account[2]}", *groups)
        return User(name, read_only=False, groups=groups, admin="system:masters" in groups)

    def _authorizer(self) -> Rbac:
        return self.api.rbac or Rbac()

    @staticmethod
    def _attributes(user: User, request: Request) -> Attributes:
        return Attributes(
            user=user.name,
            groups=(*user.groups, "system:authenticated"),
            verb=request.verb,
            resource_request=True,
            api_group=errors.GROUPS.get(request.resource, ""),
            resource=url_resource(request.resource),
            subresource=request.subresource or "",
            name=request.name or "",
            namespace=request.namespace or "",
        )

    def _authorize_path(self, user: User, method: str, path: str) -> None:
        if user.admin or user.read_only:
            return
        verb = method.lower()
        attributes = Attributes(
            user.name, (*user.groups, "system:authenticated"), verb, False, path=path
        )
        if not self._authorizer().authorize(attributes)[0]:
            raise errors.forbidden_path(user.name, verb, path)

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
            # Priority and fairness refuses before any handler runs, with http.Error: plain
            # text, and the dropped-requests tracker's Retry-After (1 s until it backs off).
            self._send(
                429,
                b"Too many requests, please try again later.\n",
                {"X-Content-Type-Options": "nosniff", "Retry-After": "1"},
                content_type="text/plain; charset=utf-8",
            )
            return True
        if outcome == 503:
            raise errors.service_unavailable()
        if outcome == 410:
            # What a list or watch from a resourceVersion older than the history meets.
            raise errors.gone("too old resource version: injected fault")
        raise errors.internal_error("injected fault")

    def _route(self, method: str, path: str, query: dict[str, str]) -> Request | None:
        match = (
            _CORE.match(path)
            or _POLICY.match(path)
            or _GROUPED.match(path)
            or _AUTHORIZATION.match(path)
        )
        if not match:
            if path.startswith(("/api", "/apis", "/openapi")) and path not in discovery_paths():
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
        if request.resource in REVIEWS:
            return self._review(request)
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
            found = self._store.get(request.resource, request.namespace, request.name or "")
            if discovery.wants_table(self.headers.get("Accept", "")):
                meta = {"resourceVersion": found.obj["metadata"]["resourceVersion"]}
                table = discovery.table(request.resource, [found.obj], meta)
                rows_with_objects(table, [found.obj], options.include_object(request.query))
                self._send_json(200, table)
            else:
                self._send(200, found.raw)
            return 200
        writers = {
            "create": (self._create, "CreateOptions", 201),
            "update": (self._update, "UpdateOptions", 200),
            "patch": (self._patch, "PatchOptions", 200),
            "delete": (self._delete, "DeleteOptions", 200),
        }
        if request.verb not in writers:
            raise errors.method_not_allowed(method)
        write, kind, code = writers[request.verb]
        is_apply = request.verb == "patch" and self._patch_type() == "apply"
        write_options = options.write_options(
            kind, request.query, self._query_lists, apply=is_apply
        )
        # The write and the controllers' reaction to it happen before the answer leaves.
        with self._store.lock:
            answer, code = write(request, write_options, code)
            if not write_options.dry_run:
                self.api.cluster.settle()
        self._send(code, answer.raw)
        return code

    @property
    def _store(self):  # type: ignore[no-untyped-def]
        return self.api.cluster.store

    def _list(self, request: Request) -> int:
        query = request.query
        list_options = options.list_options(query, watch=False)
        labels = label_selector(query.get("labelSelector"))
        fields = field_selector(request.resource, query.get("fieldSelector"))
        token = query.get("continue")
        rv_asked = list_options["resourceVersion"]
        # A list at resourceVersion "0" is served from the watch cache, which ignores limit.
        limit = 0 if rv_asked == "0" else int(query.get("limit") or 0)
        if token:
            snapshot_id, rv, offset, entries = self._store.resume(token)
        else:
            rv, everything = self._list_at(request, list_options)
            entries = [e for e in everything if labels(e.obj) and fields(e.obj)]
            snapshot_id, offset = "", 0
        page = entries[offset : offset + limit] if limit else entries[offset:]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        end = offset + len(page)
        if limit and end < len(entries):
            snapshot_id = snapshot_id or self._store.save_snapshot(rv, entries)
            meta["continue"] = self._store.continue_token(snapshot_id, rv, end)
            # etcd counts what is left only when no selector filters it.
            if not query.get("labelSelector") and not query.get("fieldSelector"):
                meta["remainingItemCount"] = len(entries) - end
        if discovery.wants_table(self.headers.get("Accept", "")):
            objects = [e.obj for e in page]
            table = discovery.table(request.resource, objects, meta)
            rows_with_objects(table, objects, options.include_object(query))
            self._send_json(200, table)
            return 200
        kind = KINDS.get(request.resource, "Namespace") + "List"
        items = b",".join(e.raw for e in page)
        head = json.dumps(
            {"kind": kind, "apiVersion": API_VERSIONS[request.resource], "metadata": meta}
        )[:-1].encode()
        self._send(200, head + b',"items":[' + items + b"]}")
        return 200

    def _list_at(self, request: Request, list_options: dict[str, Any]) -> tuple[int, list[Entry]]:
        """The objects a list reads, by its resourceVersion semantics: unset (the latest),
        "0" (any), N (not older than N: a later N is waited for, then 504) or Exact N."""
        store = self._store
        asked = list_options["resourceVersion"]
        wanted = self._parse_rv(asked) if asked not in ("", "0") else 0
        if wanted > store.rv:
            self._wait_for_rv(wanted)
        if list_options["match"] == options.EXACT:
            return wanted, store.list_at(request.resource, request.namespace, wanted)
        node = _node_equality(request.query.get("fieldSelector"))
        if request.resource == "pods" and node is not None:
            rv, everything = store.pods_on(node)
            if request.namespace:
                everything = [
                    e for e in everything if e.obj["metadata"].get("namespace") == request.namespace
                ]
            return rv, everything
        return store.list(request.resource, request.namespace)  # type: ignore[no-any-return]

    @staticmethod
    def _parse_rv(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            raise errors.bad_request(f'invalid resource version "{text}"')
        return value

    def _wait_for_rv(self, wanted: int) -> None:
        """The watch cache waits up to 3 s for a resourceVersion it has not seen yet."""
        store = self._store
        deadline = time.monotonic() + 3.0
        with store.lock:
            while store.rv < wanted and time.monotonic() < deadline:
                store.changed.wait(timeout=max(0.0, deadline - time.monotonic()))
            if store.rv < wanted:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Timeout: Too large resource version: {wanted}, current: {store.rv}",
                    {
                        "causes": [
                            {
                                "reason": "ResourceVersionTooLarge",
                                "message": "Too large resource version",
                            }
                        ],
                        "retryAfterSeconds": 1,
                    },
                    {"Retry-After": "1"},
                )

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
        return body

    def _decode(self, request: Request, body: dict[str, Any], validation: str) -> dict[str, Any]:
        kind = KINDS[request.resource]
        decoded = writes.decode_body(
            kind, API_VERSIONS[request.resource], body, validation, self._warnings
        )
        decoded["kind"] = kind
        decoded["apiVersion"] = API_VERSIONS[request.resource]
        return decoded

    def _create(self, request: Request, opts: options.WriteOptions, code: int) -> tuple[Entry, int]:
        if request.name:
            raise errors.method_not_allowed("POST")
        body = self._prepare(request, self._json_body())
        body = self._decode(request, body, opts.field_validation)
        if not body["metadata"].get("name") and body["metadata"].get("generateName"):
            body["metadata"]["name"] = body["metadata"]["generateName"] + uuid.uuid4().hex[:5]
        for system in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            body["metadata"].pop(system, None)
        if request.resource == "poddisruptionbudgets":
            body["status"] = dict(PDB_ZERO_STATUS)  # the strategy resets status on create
        if request.resource == "nodes":
            # Fields are owned as the client sent them; admission's additions are no one's.
            body = apply.record_update(None, body, self._manager(opts), self._now())
            admission.admit_node(body)
        self.api.cluster.validate(request.resource, body)
        if request.resource == "pods":
            return self.api.cluster.create_pod(body, dry_run=opts.dry_run), code
        return self._store.create(request.resource, body, dry_run=opts.dry_run), code

    def _manager(self, opts: options.WriteOptions) -> str:
        return apply.manager_from(opts.field_manager, self.headers.get("User-Agent", ""))

    def _now(self) -> str:
        return self._store.clock.rfc3339()  # type: ignore[no-any-return]

    def _update(self, request: Request, opts: options.WriteOptions, code: int) -> tuple[Entry, int]:
        body = self._prepare(request, self._json_body())
        body = self._decode(request, body, opts.field_validation)
        writes.check_name(body, request.name, request.namespace)
        self._concurrent_writer(request)
        current = self._store.get(request.resource, request.namespace, request.name or "")
        writes.check_update(
            request.resource, KINDS[request.resource], current.obj, body, uid_precondition=True
        )
        body = self._keep_other_half(request, current.obj, body)
        return self._store_update(request, opts, current, body), code

    def _store_update(
        self,
        request: Request,
        opts: options.WriteOptions,
        current: Entry,
        new: dict[str, Any],
        expected: str | None = None,
    ) -> Entry:
        self.api.cluster.validate(request.resource, new)
        if request.resource == "nodes":
            new = apply.record_update(
                current.obj,
                new,
                self._manager(opts),
                self._now(),
                subresource=request.subresource or "",
            )
        expected = expected or new["metadata"].get("resourceVersion") or None
        stored: Entry = self._store.replace(
            request.resource, new, expected_rv=expected, dry_run=opts.dry_run
        )
        if not opts.dry_run:
            self.api.cluster.termination.released(request.resource, current, stored)
        return stored

    def _patch_type(self) -> str | None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        return PATCH_TYPES.get(content_type)

    def _patch(self, request: Request, opts: options.WriteOptions, code: int) -> tuple[Entry, int]:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patch_type = PATCH_TYPES.get(content_type)
        if patch_type is None or (patch_type == "apply" and request.resource != "nodes"):
            raise errors.unsupported_media_type(content_type)
        if patch_type == "apply":
            return self._apply(request, opts)
        patch = self._json_body()
        # The whole read-patch-write holds the store lock, as the real server retries a patch
        # without a precondition internally: only a client's own resourceVersion can conflict.
        self._concurrent_writer(request)
        current = self._store.get(request.resource, request.namespace, request.name or "")
        kind = KINDS[request.resource]
        if patch_type == "merge":
            if not isinstance(patch, dict):
                raise errors.bad_request("merge patch must be a JSON object")
            patched = patching.json_merge_patch(current.obj, patch)
        elif patch_type == "strategic":
            if not isinstance(patch, dict):
                raise errors.bad_request("strategic merge patch must be a JSON object")
            patched = patching.strategic_merge_patch(current.obj, patch, kind)
        else:
            patched = patching.json_patch(current.obj, patch, opts.field_validation)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patch removed the object's metadata")
        patched = writes.decode_patched(
            kind,
            patched,
            patch,
            strategic=patch_type == "strategic",
            validation=opts.field_validation,
            warnings=self._warnings,
        )
        writes.check_name(patched, request.name, request.namespace)
        writes.check_update(request.resource, kind, current.obj, patched, uid_precondition=False)
        patched = self._keep_other_half(request, current.obj, patched)
        return self._store_update(request, opts, current, patched), code

    def _apply(self, request: Request, opts: options.WriteOptions) -> tuple[Entry, int]:
        """Server-side apply of a node (kubesim/apply.py)."""
        try:
            config = yaml.safe_load(self._body() or b"{}")
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from None
        if not isinstance(config, dict):
            raise errors.bad_request("error decoding YAML: the patch is not an object")
        version = f"{config.get('apiVersion')}, Kind={config.get('kind')}"
        if config.get("apiVersion") != "v1" or config.get("kind") != "Node":
            raise errors.bad_request(
                "Incorrect version specified in apply patch. Specified patch version: "
                f"{config.get('apiVersion') or ''}, expected: v1"
                if config.get("apiVersion") != "v1"
                else f"unexpected kind in apply patch: {version}"
            )
        writes.check_name(config, request.name, None)
        writes.check_apply_config("Node", config)
        self._concurrent_writer(request)
        current = self._store.objects["nodes"].get(request.name or "")
        new = apply.server_side_apply(
            current.obj if current else None,
            config,
            opts.field_manager,
            force=opts.force,
            now=self._now(),
        )
        if current is None:
            new.setdefault("metadata", {})["name"] = request.name
            admission.admit_node(new)
            self.api.cluster.validate("nodes", new)
            return self._store.create("nodes", new, dry_run=opts.dry_run), 201
        writes.check_update("nodes", "Node", current.obj, new, uid_precondition=False)
        new = self._keep_other_half(request, current.obj, new)
        self.api.cluster.validate("nodes", new)
        stored = self._store.replace("nodes", new, expected_rv=None, dry_run=opts.dry_run)
        if not opts.dry_run:
            self.api.cluster.termination.released("nodes", current, stored)
        return stored, 200

    def _delete(self, request: Request, opts: options.WriteOptions, code: int) -> tuple[Entry, int]:
        delete_options = DeleteOptions.parse(self._json_body(), request.query, opts.dry_run)
        gone = self.api.cluster.delete(
            request.resource, request.namespace, request.name or "", delete_options
        )
        meta = gone.obj["metadata"]
        if request.resource == "pods" or meta.get("finalizers"):
            # The pod registry answers with the object (ReturnDeletedObject); any registry
            # answers with it while finalizers hold the deletion.
            return gone, code
        details = {**errors.details(request.resource, meta["name"]), "uid": meta.get("uid")}
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }
        return entry(status), code

    @staticmethod
    def _keep_other_half(
        request: Request, current: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        """The main resource cannot change status; the status subresource changes only that."""
        if request.resource not in ("nodes", "pods", "poddisruptionbudgets"):
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
        # System fields a client cannot set: deletion is the DELETE verb's job.
        meta = dict(result.get("metadata") or {})
        for system in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            if system in current["metadata"]:
                meta[system] = current["metadata"][system]
            else:
                meta.pop(system, None)
        result["metadata"] = meta
        return result

    def _concurrent_writer(self, request: Request) -> None:
        """Fault: another writer changes the node between the client's read and this write —
        a bumped annotation, or its kubelet reporting a Ready status (the node lifecycle
        controller then taints it)."""
        if request.resource != "nodes":
            return
        faults, name = self.api.faults, request.name or ""
        ready = faults.take_ready_report(name)
        if ready is not None:
            self._report_ready(name, ready)
        if not faults.take_conflict(name):
            return
        current = self._store.get("nodes", None, name)
        bumped = copy.deepcopy(current.obj)
        annotations = bumped["metadata"].setdefault("annotations", {})
        annotations["kubesim.io/concurrent-writer"] = str(time.time_ns())
        self._store.replace("nodes", bumped, expected_rv=None)

    def _report_ready(self, name: str, status: str) -> None:
        cluster = self.api.cluster
        node = copy.deepcopy(cluster.store.get("nodes", None, name).obj)
        reasons = {
            "True": ("KubeletReady", "kubelet is posting ready status"),
            "False": ("KubeletNotReady", "container runtime network not ready"),
        }
        reason, message = reasons.get(
            status, ("NodeStatusUnknown", "Kubelet stopped posting node status.")
        )
        for condition in (node.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Ready":
                if condition.get("status") != status:
                    condition["lastTransitionTime"] = cluster.store.clock.rfc3339()
                condition.update({"status": status, "reason": reason, "message": message})
        cluster.store.replace("nodes", node, expected_rv=None)
        cluster.settle()

    def _evict(self, request: Request) -> int:
        if self.command != "POST" or request.resource != "pods":
            raise errors.method_not_allowed(self.command)
        create_options = options.write_options("CreateOptions", request.query, self._query_lists)
        body = self._json_body() or {}
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        eviction = writes.decode_body(
            "Eviction", "policy/v1", body, create_options.field_validation, self._warnings
        )
        self.api.cluster.evict(
            request.namespace or "default",
            request.name or "",
            eviction,
            dry_run=create_options.dry_run,
        )
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

    def _review(self, request: Request) -> int:
        """SelfSubjectAccessReview / SelfSubjectRulesReview for the caller."""
        if request.verb != "create":
            raise errors.method_not_allowed(self.command)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type == protobuf.CONTENT_TYPE:
            try:
                body = protobuf.decode_review(self._body())
            except protobuf.ProtobufError as exc:
                raise errors.bad_request(f"error decoding request body: {exc}") from None
        else:
            body = self._json_body()
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        kind = REVIEWS[request.resource]
        review = writes.decode_body(
            kind, API_VERSIONS[request.resource], body, "Warn", self._warnings
        )
        user = self._who
        assert user is not None
        spec = review.get("spec") or {}
        who = rbac.Caller(
            user.name, (*user.groups, "system:authenticated"), user.admin, user.read_only
        )
        if kind == "SelfSubjectRulesReview":
            status = rbac.rules_review(self._authorizer(), who, str(spec.get("namespace") or ""))
        else:
            status = rbac.access_review(self._authorizer(), who, spec)
        answer = {
            "kind": kind,
            "apiVersion": API_VERSIONS[request.resource],
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        self._send_json(201, answer)
        return 201

    # --- watch: a chunked stream of JSON events ---
    def _watch(self, request: Request) -> int:
        query = request.query
        list_options = options.list_options(query, watch=True)
        labels = label_selector(query.get("labelSelector"))
        fields = field_selector(request.resource, query.get("fieldSelector"))
        as_table = discovery.wants_table(self.headers.get("Accept", ""))
        include = options.include_object(query) if as_table else "Metadata"
        rv = list_options["resourceVersion"]
        if rv not in ("", "0"):
            self._parse_rv(rv)

        def matches(found: Entry | None) -> bool:
            return (
                found is not None
                and labels(found.obj)
                and fields(found.obj)
                and (
                    request.namespace is None
                    or found.obj["metadata"].get("namespace") == request.namespace
                )
            )

        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        stream = WatchStream(
            self._store,
            request.resource,
            KINDS.get(request.resource, "Namespace"),
            API_VERSIONS[request.resource],
            matches,
            self._chunk,
        )
        if as_table:
            stream.encode = TableEncoder(request.resource, include).encode
        try:
            stream.run(
                resource_version=rv,
                send_initial=list_options["sendInitialEvents"],
                bookmarks=query.get("allowWatchBookmarks") in ("true", "1") and not as_table,
                timeout=float(query.get("timeoutSeconds") or 1800),
                namespace=request.namespace,
            )
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            return 499
        return 200

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # --- control endpoints for tests, the demo and benchmarks ---
    def _control(self, method: str, path: str, user: User) -> int:
        if not user.admin:
            raise errors.forbidden_path(user.name, method.lower(), path)
        if path == "/kubesim/faults":
            if method == "POST":
                self.api.faults.configure(self._json_body() or {})
            self._send_json(200, self.api.faults.describe())
            return 200
        if path == "/kubesim/gpus" and method == "POST":
            return self._set_gpus()
        if path == "/kubesim/exporter" and method == "POST":
            return self._set_exporter()
        if path == "/kubesim/schedule" and method == "POST":
            self._send_json(200, {"bound": self.api.cluster.schedule_pending()})
            return 200
        if path == "/kubesim/clock":
            return self._clock(method)
        if path in ("/kubesim/workload", "/kubesim/workload/history") and method == "GET":
            return self._workload(path)
        if path == "/kubesim/kubelet" and method == "POST":
            return self._set_kubelet()
        if path == "/kubesim/controllers" and method == "POST":
            return self._set_controllers()
        raise errors.not_found("kubesim", path)

    def _set_gpus(self) -> int:
        """{"node": N, "gpu": 0 | [0, 1] | "all", "util": float | null, "xid": int | null}"""
        cluster = self.api.cluster
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

    def _set_exporter(self) -> int:
        """{"node": N, "enabled": false}: the node's exporter stops answering (or starts)."""
        disabled = self.api.cluster.exporter_disabled
        body = self._json_body() or {}
        node = str(body["node"])
        if body.get("enabled", True):
            disabled.discard(node)
        else:
            disabled.add(node)
        self._send_json(200, {"node": node, "enabled": node not in disabled})
        return 200

    def _workload(self, path: str) -> int:
        """The workload model's state, or every pod's record (what a watcher saw go by)."""
        runner = self.api.workload
        if runner is None:
            raise errors.not_found("kubesim", path)
        with self.api.cluster.store.lock:
            body = runner.history() if path.endswith("history") else runner.describe()
        self._send_json(200, body)
        return 200

    def _set_kubelet(self) -> int:
        """{"node": N, "posting": false}: the kubelet stops (or resumes) posting status."""
        cluster = self.api.cluster
        body = self._json_body() or {}
        with cluster.store.lock:
            if body.get("posting", True):
                cluster.lifecycle.kubelet_resumes(str(body["node"]))
            else:
                cluster.lifecycle.kubelet_stops(str(body["node"]))
            cluster.settle()
        self._send_json(200, {"node": body["node"], "posting": body.get("posting", True)})
        return 200

    def _set_controllers(self) -> int:
        """{"disruption": false}: the disruption controller stalls (budgets go stale)."""
        cluster = self.api.cluster
        body = self._json_body() or {}
        with cluster.store.lock:
            if "disruption" in body:
                cluster.disruption.paused = not body["disruption"]
            cluster.settle()
        self._send_json(200, {"disruption": not cluster.disruption.paused})
        return 200

    def _clock(self, method: str) -> int:
        """GET the simulated time; POST {"advance": seconds} or {"scale": factor}. An
        advance fires every timer that became due before it answers."""
        clock, timers = self._store.clock, self.api.cluster.timers
        if method == "POST":
            body = self._json_body() or {}
            if "scale" in body:
                clock.set_scale(float(body["scale"]))
            if "advance" in body:
                # Step through the timers due on the way, each at its own time.
                timers.run_until(clock.now() + float(body["advance"]))
            timers.wake()
            timers.run_due()
        now = clock.now()
        self._send_json(
            200,
            {"now": clock.rfc3339_micro(now), "scale": clock.scale, "timers": len(timers)},
        )
        return 200


_URL_RESOURCE = {"eventsv1": "events"}


def url_resource(resource: str) -> str:
    """The resource as its URL names it (kubesim stores events.k8s.io's view as eventsv1)."""
    return _URL_RESOURCE.get(resource, resource)


def discovery_paths() -> tuple[str, ...]:
    return (
        "/api",
        "/api/v1",
        "/apis",
        *(f"/apis/{group}" for group in discovery.GROUPS),
        *(f"/apis/{gv}" for gv in discovery.GROUP_RESOURCES),
    )


def _node_equality(selector: str | None) -> str | None:
    """X when the field selector requires spec.nodeName=X (the index can answer it)."""
    for term in (selector or "").split(","):
        match = re.match(r"^\s*spec\.nodeName\s*==?\s*(\S+)\s*$", term)
        if match:
            return match.group(1)
    return None


# A new budget's status before the disruption controller has seen it.
PDB_ZERO_STATUS = {
    "disruptionsAllowed": 0,
    "currentHealthy": 0,
    "desiredHealthy": 0,
    "expectedPods": 0,
}


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512
    allow_reuse_address = True


def make_server(api: ApiServer, host: str, port: int) -> Server:
    handler = type("BoundHandler", (Handler,), {"api": api})
    return Server((host, port), handler)
