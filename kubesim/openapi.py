"""OpenAPI v2 and v3 documents for the kinds kubesim serves, generated from the official
Python client's model classes.

Each model class carries its fields' types (`openapi_types`) and JSON names
(`attribute_map`); its pydantic fields carry each field's description and whether it is
required, and its docstring the model's description. From them come the schemas; the paths
come from the kinds kubesim serves and the verbs it answers. The documents are built once,
on the first request for one, and kept as bytes.

What the models do not carry, the documents take from kubesim itself: the list merge keys
its strategic merge patch uses (`x-kubernetes-patch-merge-key`), so a client that computes a
patch from the document computes the one kubesim applies.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any

from kubesim import openapi_proto
from kubesim.discovery import VERSION
from kubesim.patching import MERGE_KEYS, MERGE_SETS

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
# The one named schema no model class stands for: the client types it as a union.
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
PACKAGES = {
    "": "io.k8s.api.core.v1",
    "apps": "io.k8s.api.apps.v1",
    "events.k8s.io": "io.k8s.api.events.v1",
    "policy": "io.k8s.api.policy.v1",
    "resource.k8s.io": "io.k8s.api.resource.v1",
}
# Model classes of apimachinery's meta/v1 package (the client names them like any V1 model).
META_MODELS = (
    "V1ObjectMeta",
    "V1ListMeta",
    "V1Status",
    "V1DeleteOptions",
    "V1LabelSelector",
    "V1Condition",
    "V1WatchEvent",
)
# The core types a non-core kind embeds (a DaemonSet's pod template): named in core/v1.
CORE_MODELS = ("V1PodTemplateSpec",)
RW = ("get", "list", "watch", "create", "update", "patch", "delete")
READ = ("get", "list", "watch")
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


@dataclass(frozen=True)
class Kind:
    group: str
    kind: str
    model: str
    plural: str
    namespaced: bool
    verbs: tuple[str, ...]
    subresources: tuple[str, ...] = ()
    list_of: str = ""  # the client's list model when it is not the model's name + "List"

    @property
    def list_model(self) -> str:
        return self.list_of or self.model + "List"

    @property
    def group_version(self) -> str:
        return f"{self.group}/v1" if self.group else "v1"

    @property
    def gvk(self) -> dict[str, str]:
        return {"group": self.group, "kind": self.kind, "version": "v1"}

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/v1" if self.group else "/api/v1"

    @property
    def operation_group(self) -> str:
        names = {"": "Core", "events.k8s.io": "Events", "resource.k8s.io": "Resource"}
        return names.get(self.group, self.group.title()) + "V1"


SERVED = (
    Kind("", "Node", "V1Node", "nodes", False, RW, ("status",)),
    Kind("", "Pod", "V1Pod", "pods", True, RW, ("status", "eviction")),
    Kind("", "Event", "CoreV1Event", "events", True, RW),
    Kind("", "Namespace", "V1Namespace", "namespaces", False, ("get", "list")),
    Kind(
        "policy", "PodDisruptionBudget", "V1PodDisruptionBudget", "poddisruptionbudgets", True, RW
    ),
    Kind("apps", "DaemonSet", "V1DaemonSet", "daemonsets", True, READ),
    Kind("events.k8s.io", "Event", "EventsV1Event", "events", True, READ),
    Kind("resource.k8s.io", "DeviceClass", "V1DeviceClass", "deviceclasses", False, READ),
    Kind(
        "resource.k8s.io",
        "ResourceClaim",
        "ResourceV1ResourceClaim",
        "resourceclaims",
        True,
        READ,
        list_of="V1ResourceClaimList",
    ),
    Kind(
        "resource.k8s.io",
        "ResourceClaimTemplate",
        "V1ResourceClaimTemplate",
        "resourceclaimtemplates",
        True,
        READ,
    ),
    Kind("resource.k8s.io", "ResourceSlice", "V1ResourceSlice", "resourceslices", False, READ),
)
EVICTION = Kind("policy", "Eviction", "V1Eviction", "evictions", True, ())


def _short_name(model: str) -> str:
    """The Go type's name: V1Node -> Node, CoreV1Event -> Event, EventsV1EventSeries ->
    EventSeries."""
    return re.sub(r"^[A-Za-z]*?V1(?=[A-Z])", "", model)


def _model(name: str) -> type:
    # Imported on the first request for a document: the client's models cost 30 MB and most
    # kubesim processes never serve one.
    from kubernetes.client import models

    return getattr(models, name)  # type: ignore[no-any-return]


def _has_model(name: str) -> bool:
    try:
        _model(name)
    except AttributeError:
        return False
    return True


def _description(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return doc.split("Attributes:", 1)[0].strip()


class Schemas:
    """The schemas reachable from the served kinds, named as kube-apiserver names them."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # model class -> definition name
        self.definitions: dict[str, dict[str, Any]] = {}
        for name in META_MODELS:
            self._walk(name, META)
        for name in CORE_MODELS:
            self._walk(name, PACKAGES[""])
        for kind in (*SERVED, EVICTION):
            self._walk(kind.model, PACKAGES[kind.group])
            list_model = kind.list_model
            if _has_model(list_model):
                self._walk(list_model, PACKAGES[kind.group])
        self._add_extensions()

    def ref(self, model: str) -> str:
        return self.names[model]

    def _walk(self, model: str, package: str) -> None:
        if model in self.names:
            return
        self.names[model] = f"{package}.{_short_name(model)}"
        cls = _model(model)
        for type_text in cls.openapi_types.values():  # type: ignore[attr-defined]
            for inner in re.findall(r"\b((?:[A-Z][a-z]+)?V1[A-Z][A-Za-z0-9]*)\b", type_text):
                self._walk(inner, package)
        self.definitions[self.names[model]] = self._schema(cls)

    def _schema(self, cls: type) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required = []
        # A field's JSON name is its serialization alias, or its Python name (a client-side
        # rename like `var_continue` keeps the JSON name as its alias).
        fields = {
            (field.serialization_alias or field.alias or name): field
            for name, field in cls.model_fields.items()  # type: ignore[attr-defined]
        }
        for attr, type_text in sorted(
            cls.openapi_types.items(),  # type: ignore[attr-defined]
            key=lambda item: cls.attribute_map[item[0]],  # type: ignore[attr-defined]
        ):
            json_name = cls.attribute_map[attr]  # type: ignore[attr-defined]
            field = fields.get(json_name) or fields[attr]
            prop = self._type(type_text, str(field.annotation))
            if field.description:
                prop["description"] = field.description
            properties[json_name] = prop
            if field.is_required():
                required.append(json_name)
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        description = _description(cls)
        if description:
            schema["description"] = description
        if required:
            schema["required"] = required
        return schema

    def _type(self, text: str, annotation: str) -> dict[str, Any]:
        scalar = {
            "str": {"type": "string"},
            "int": {"type": "integer", "format": "int64"},
            "float": {"type": "number", "format": "double"},
            "bool": {"type": "boolean"},
            "datetime": {"type": "string", "format": "date-time"},
            "date": {"type": "string", "format": "date"},
            "bytes": {"type": "string", "format": "byte"},
        }
        if text in scalar:
            return dict(scalar[text])
        if text == "object":
            # IntOrString shows in the model as a union of int and str.
            if "int" in annotation and "str" in annotation:
                return {"$ref": INT_OR_STRING}
            return {"type": "object"}
        if text.startswith("List["):
            return {"type": "array", "items": self._type(text[5:-1], annotation)}
        if text.startswith("Dict[str, "):
            return {"type": "object", "additionalProperties": self._type(text[10:-1], annotation)}
        return {"$ref": self.names[text]}

    def _add_extensions(self) -> None:
        for kind in (*SERVED, EVICTION):
            self.definitions[self.names[kind.model]]["x-kubernetes-group-version-kind"] = [kind.gvk]
            list_model = self.names.get(kind.list_model)
            if list_model:
                gvk = {**kind.gvk, "kind": kind.kind + "List"}
                self.definitions[list_model]["x-kubernetes-group-version-kind"] = [gvk]
        shared = [kind.gvk for kind in SERVED if kind.verbs != READ] + [EVICTION.gvk]
        for name in ("V1Status", "V1DeleteOptions", "V1WatchEvent"):
            self.definitions[self.names[name]]["x-kubernetes-group-version-kind"] = [
                {**gvk, "kind": _short_name(name)} for gvk in shared
            ]
        roots = {"Node": "V1Node", "Pod": "V1Pod"}
        for kind_name, paths in MERGE_KEYS.items():
            for path, key in paths.items():
                prop = self._property(roots[kind_name], path)
                prop["x-kubernetes-patch-merge-key"] = key
                prop["x-kubernetes-patch-strategy"] = "merge"
        for path in MERGE_SETS:
            self._property("V1Pod", path)["x-kubernetes-patch-strategy"] = "merge"

    def _property(self, root: str, path: str) -> dict[str, Any]:
        """The schema property at a dotted path (`[]` stepping into a list's items)."""
        schema = self.definitions[self.names[root]]
        prop: dict[str, Any] = {}
        for step in path.split("."):
            name = step.removesuffix("[]")
            prop = schema["properties"][name]
            inner = prop["items"] if step.endswith("[]") else prop
            if "$ref" in inner:
                schema = self.definitions[inner["$ref"]]
        return prop


# --- paths ---


def _parameter(name: str, where: str, description: str, type_: str = "string") -> dict[str, Any]:
    param: dict[str, Any] = {
        "name": name,
        "in": where,
        "description": description,
        "type": type_,
        "uniqueItems": True,
    }
    if where == "path":
        param["required"] = True
    return param


WRITE_PARAMETERS = [
    _parameter(
        "dryRun", "query", "When present, indicates that modifications should not be persisted."
    ),
    _parameter(
        "fieldManager", "query", "A name associated with the actor or entity making these changes."
    ),
    _parameter(
        "fieldValidation",
        "query",
        "How the server handles unknown or duplicate fields: Ignore, Warn or Strict.",
    ),
]
LIST_PARAMETERS = [
    _parameter(
        "labelSelector",
        "query",
        "A selector to restrict the list of returned objects by their labels.",
    ),
    _parameter(
        "fieldSelector",
        "query",
        "A selector to restrict the list of returned objects by their fields.",
    ),
    _parameter(
        "limit", "query", "The maximum number of responses to return for a list call.", "integer"
    ),
    _parameter("continue", "query", "The continue option from a previous paged list."),
    _parameter(
        "resourceVersion",
        "query",
        "Constrains which resource versions a request may be served from.",
    ),
    _parameter("timeoutSeconds", "query", "Timeout for the list/watch call.", "integer"),
    _parameter("watch", "query", "Watch for changes to the described resources.", "boolean"),
]
NAME = _parameter("name", "path", "name of the object")
NAMESPACE = _parameter(
    "namespace", "path", "object name and auth scope, such as for teams and projects"
)


@dataclass(frozen=True)
class Operation:
    method: str
    action: str  # x-kubernetes-action
    operation_id: str
    kind: Kind
    response: str  # model of the 200 answer
    body: str | None = None  # model of the request body
    parameters: tuple[dict[str, Any], ...] = ()


def _operations(kind: Kind) -> dict[str, list[Operation]]:
    """Path -> the operations on it, for one served kind."""
    base = (
        f"{kind.prefix}/namespaces/{{namespace}}/{kind.plural}"
        if kind.namespaced
        else f"{kind.prefix}/{kind.plural}"
    )
    item = f"{base}/{{name}}"
    paths = {base: _collection_operations(kind), item: _item_operations(kind)}
    if kind.namespaced and "list" in kind.verbs:
        paths[f"{kind.prefix}/{kind.plural}"] = [_list_all_namespaces(kind)]
    for sub in kind.subresources:
        paths[f"{item}/{sub}"] = _subresource_operations(kind, sub)
    return {path: ops for path, ops in paths.items() if ops}


def _operation_id(verb: str, kind: Kind, suffix: str = "") -> str:
    """As the API server names them: listCoreV1NamespacedPod, patchCoreV1NodeStatus."""
    scope = "Namespaced" if kind.namespaced else ""
    return f"{verb}{kind.operation_group}{scope}{kind.kind}{suffix}"


def _collection_operations(kind: Kind) -> list[Operation]:
    """List and create, on the kind's path (within a namespace for a namespaced kind)."""
    scoped = (NAMESPACE,) if kind.namespaced else ()
    operations = []
    if "list" in kind.verbs:
        operations.append(
            Operation(
                "get",
                "list",
                _operation_id("list", kind),
                kind,
                kind.list_model,
                None,
                (*scoped, *LIST_PARAMETERS),
            )
        )
    if "create" in kind.verbs:
        operations.append(
            Operation(
                "post",
                "post",
                _operation_id("create", kind),
                kind,
                kind.model,
                kind.model,
                (*scoped, *WRITE_PARAMETERS),
            )
        )
    return operations


def _list_all_namespaces(kind: Kind) -> Operation:
    return Operation(
        "get",
        "list",
        f"list{kind.operation_group}{kind.kind}ForAllNamespaces",
        kind,
        kind.list_model,
        None,
        tuple(LIST_PARAMETERS),
    )


def _item_operations(kind: Kind) -> list[Operation]:
    """Read, replace, patch and delete one object, by name."""
    one = _one(kind)
    operations = []
    if "get" in kind.verbs:
        operations.append(
            Operation("get", "get", _operation_id("read", kind), kind, kind.model, None, one)
        )
    if "update" in kind.verbs:
        operations.append(
            Operation(
                "put",
                "put",
                _operation_id("replace", kind),
                kind,
                kind.model,
                kind.model,
                (*one, *WRITE_PARAMETERS),
            )
        )
    if "patch" in kind.verbs:
        force = _parameter("force", "query", 'Force is going to "force" Apply requests.', "boolean")
        operations.append(
            Operation(
                "patch",
                "patch",
                _operation_id("patch", kind),
                kind,
                kind.model,
                "Patch",
                (*one, *WRITE_PARAMETERS, force),
            )
        )
    if "delete" in kind.verbs:
        operations.append(_delete(kind, one))
    return operations


def _one(kind: Kind) -> tuple[dict[str, Any], ...]:
    """The parameters that name one object."""
    return (NAME, NAMESPACE) if kind.namespaced else (NAME,)


def _delete(kind: Kind, one: tuple[dict[str, Any], ...]) -> Operation:
    dry_run = _parameter(
        "dryRun", "query", "When present, indicates that modifications should not be persisted."
    )
    return Operation(
        "delete",
        "delete",
        _operation_id("delete", kind),
        kind,
        "V1Status",
        "V1DeleteOptions",
        (*one, dry_run),
    )


def _subresource_operations(kind: Kind, sub: str) -> list[Operation]:
    """A pod's eviction (create only), or a status (read, replace, patch)."""
    one = _one(kind)
    if sub == "eviction":
        return [
            Operation(
                "post",
                "post",
                _operation_id("create", kind, "Eviction"),
                EVICTION,
                "V1Eviction",
                "V1Eviction",
                (*one, *WRITE_PARAMETERS),
            )
        ]
    return [
        Operation("get", "get", _operation_id("read", kind, "Status"), kind, kind.model, None, one),
        Operation(
            "put",
            "put",
            _operation_id("replace", kind, "Status"),
            kind,
            kind.model,
            kind.model,
            (*one, *WRITE_PARAMETERS),
        ),
        Operation(
            "patch",
            "patch",
            _operation_id("patch", kind, "Status"),
            kind,
            kind.model,
            "Patch",
            (*one, *WRITE_PARAMETERS),
        ),
    ]


# --- the two documents ---


class Documents:
    def __init__(self) -> None:
        self.schemas = Schemas()
        self.definitions = {
            **self.schemas.definitions,
            INT_OR_STRING: {
                "type": "string",
                "format": "int-or-string",
                "description": "IntOrString is a type that can hold an int32 or a string.",
            },
            f"{META}.Patch": {
                "type": "object",
                "description": "Patch is provided to give a concrete name and type to the "
                "Kubernetes PATCH request body.",
            },
        }

    def _ref_name(self, model: str) -> str:
        return f"{META}.Patch" if model == "Patch" else self.schemas.ref(model)

    def v2(self) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        for kind in SERVED:
            for path, ops in _operations(kind).items():
                item = paths.setdefault(path, {})
                for op in ops:
                    parameters = list(op.parameters)
                    if op.body:
                        ref = {"$ref": f"#/definitions/{self._ref_name(op.body)}"}
                        parameters.append(
                            {"name": "body", "in": "body", "required": True, "schema": ref}
                        )
                    item[op.method] = {
                        "description": f"{op.action} {op.kind.kind}",
                        "operationId": op.operation_id,
                        "consumes": list(PATCH_TYPES) if op.method == "patch" else ["*/*"],
                        "produces": ["application/json", "application/yaml"],
                        "schemes": ["https"],
                        "tags": [f"{op.kind.group_version.replace('/', '_')}"],
                        "parameters": parameters,
                        "responses": {
                            "200": {
                                "description": "OK",
                                "schema": {"$ref": f"#/definitions/{self._ref_name(op.response)}"},
                            },
                            "401": {"description": "Unauthorized"},
                        },
                        "x-kubernetes-action": op.action,
                        "x-kubernetes-group-version-kind": op.kind.gvk,
                    }
        definitions = json.loads(
            json.dumps(self.definitions).replace('"$ref": "', '"$ref": "#/definitions/')
        )
        return {
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
            "paths": paths,
            "definitions": definitions,
            "securityDefinitions": {
                "BearerToken": {
                    "type": "apiKey",
                    "name": "authorization",
                    "in": "header",
                    "description": "Bearer Token authentication",
                }
            },
            "security": [{"BearerToken": []}],
        }

    def v3(self, group_version: str) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        for kind in SERVED:
            if kind.group_version != group_version:
                continue
            for path, ops in _operations(kind).items():
                item = paths.setdefault(path, {"parameters": []})
                for op in ops:
                    operation: dict[str, Any] = {
                        "description": f"{op.action} {op.kind.kind}",
                        "operationId": op.operation_id,
                        "tags": [group_version.replace("/", "_")],
                        "parameters": [self._v3_parameter(p) for p in op.parameters],
                        "responses": {
                            "200": {
                                "description": "OK",
                                "content": {
                                    media: {"schema": self._v3_ref(op.response)}
                                    for media in ("application/json", "application/yaml")
                                },
                            },
                            "401": {"description": "Unauthorized"},
                        },
                        "x-kubernetes-action": op.action,
                        "x-kubernetes-group-version-kind": op.kind.gvk,
                    }
                    if op.body:
                        media_types = PATCH_TYPES if op.method == "patch" else ("*/*",)
                        operation["requestBody"] = {
                            "content": {m: {"schema": self._v3_ref(op.body)} for m in media_types},
                            "required": True,
                        }
                    item[op.method] = operation
        schemas = {name: self._v3_schema(schema) for name, schema in self.definitions.items()}
        # v3 states the two types instead of v2's string type: kubectl names it IntOrString.
        schemas[INT_OR_STRING] = {
            "description": self.definitions[INT_OR_STRING]["description"],
            "format": "int-or-string",
            "oneOf": [{"type": "integer"}, {"type": "string"}],
        }
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
            "paths": paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {
                    "BearerToken": {
                        "type": "apiKey",
                        "description": "Bearer Token authentication",
                        "name": "authorization",
                        "in": "header",
                    }
                },
            },
        }

    def _v3_ref(self, model: str) -> dict[str, Any]:
        return {"$ref": f"#/components/schemas/{self._ref_name(model)}"}

    @staticmethod
    def _v3_parameter(param: dict[str, Any]) -> dict[str, Any]:
        result = {k: v for k, v in param.items() if k not in ("type", "uniqueItems")}
        result["schema"] = {"type": param["type"], "uniqueItems": True}
        return result

    def _v3_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """v3 shape: a described reference wraps the $ref in allOf, as kube-openapi does."""
        result = dict(schema)
        if "$ref" in schema:
            ref = {"$ref": f"#/components/schemas/{schema['$ref']}"}
            if len(schema) == 1:
                return ref
            result = {k: v for k, v in schema.items() if k != "$ref"}
            result["allOf"] = [ref]
            return result
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), dict):
                result[key] = self._v3_schema(schema[key])
        if "properties" in schema:
            result["properties"] = {k: self._v3_schema(v) for k, v in schema["properties"].items()}
        return result


@functools.cache
def documents() -> Documents:
    return Documents()


@dataclass(frozen=True)
class Rendered:
    body: bytes
    etag: str


@functools.cache
def v2_json() -> Rendered:
    return _rendered(json.dumps(documents().v2(), separators=(",", ":")).encode())


# Asked for as `...spec.v2@v1.0+protobuf` (client-go) or `...spec.v2.v1.0+protobuf`; the
# answer names the second, the first not being a valid media type.
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@functools.cache
def v2_proto() -> Rendered:
    return _rendered(openapi_proto.document(documents().v2()))


@functools.cache
def v3_document(group_version: str) -> Rendered:
    return _rendered(json.dumps(documents().v3(group_version), separators=(",", ":")).encode())


def v3_paths() -> dict[str, str]:
    """URL path (without /openapi/v3/) -> the group version it documents."""
    return {
        ("api/v1" if gv == "v1" else f"apis/{gv}"): gv
        for gv in dict.fromkeys(kind.group_version for kind in SERVED)
    }


def v3_index() -> dict[str, Any]:
    return {
        "paths": {
            path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={v3_document(gv).etag}"}
            for path, gv in v3_paths().items()
        }
    }


def _rendered(body: bytes) -> Rendered:
    return Rendered(body, hashlib.sha512(body).hexdigest().upper())
