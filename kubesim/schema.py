"""The served kinds' schemas, read from the official Python client's model classes.

The real server decodes every body into Go structs. Three things follow, and this module
reproduces them from the client's `openapi_types`/`attribute_map` (no hand-written schema):

- a field the type does not declare is dropped, with a warning, or refused under
  `fieldValidation=Strict` (`unknown field "spec.foo"`);
- a value of the wrong JSON type fails decoding (`json: cannot unmarshal number into Go
  struct field ObjectMeta.metadata.labels of type string`);
- what is serialised back drops empty lists and maps (Go's `omitempty`), but keeps empty
  structs (`"securityContext": {}`), and drops the few `omitempty` strings and booleans
  listed in OMIT_ZERO.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import kubernetes.client as models

MODELS = {
    "Node": "V1Node",
    "Pod": "V1Pod",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "Eviction": "V1Eviction",
    "Event": "CoreV1Event",
    "SelfSubjectAccessReview": "V1SelfSubjectAccessReview",
    "SelfSubjectRulesReview": "V1SelfSubjectRulesReview",
}
# Lists serialised even when empty (no omitempty in the Go types).
KEEP_EMPTY = {"containers", "nodeSelectorTerms"}
# Time fields that are structs, not pointers: a zero value is written as null.
KEEP_NULL = {"creationTimestamp", "lastProbeTime", "lastTransitionTime", "lastHeartbeatTime"}
# Strings and booleans with omitempty, by kind and dotted path: "" and false are dropped.
OMIT_ZERO: dict[str, frozenset[str]] = {
    "Node": frozenset(
        {"spec.unschedulable", "spec.podCIDR", "spec.providerID", "spec.taints[].value"}
    ),
    "Pod": frozenset(
        {
            "spec.nodeName",
            "spec.hostNetwork",
            "spec.serviceAccountName",
            "spec.tolerations[].key",
            "spec.tolerations[].operator",
            "spec.tolerations[].value",
            "spec.tolerations[].effect",
            "status.nominatedNodeName",
            "status.podIP",
            "status.hostIP",
        }
    ),
}
# resource.Quantity fields: the Python client types them as strings, but a Quantity decodes
# from a JSON number as well (`nvidia.com/gpu: 1`) and is served back as its string.
QUANTITY_MAPS = {
    ("V1ResourceRequirements", "limits"),
    ("V1ResourceRequirements", "requests"),
    ("V1NodeStatus", "allocatable"),
    ("V1NodeStatus", "capacity"),
    ("V1PodSpec", "overhead"),
    ("V1ContainerStatus", "allocatedResources"),
    ("V1PodStatus", "allocatedResources"),
}
QUANTITY_FIELDS = {("V1EmptyDirVolumeSource", "sizeLimit")}
_LIST = re.compile(r"^List\[(.*)\]$")
_DICT = re.compile(r"^Dict\[str, (.*)\]$")
_SCALARS = {"str": "string", "int": "int64", "bool": "bool", "float": "float64"}


@dataclass(frozen=True)
class TypeMismatch:
    """A value of the wrong JSON type, described as both of Go's decoders word it."""

    json_type: str  # number, string, bool, object, array
    python_type: str  # int64, float64, string, bool, map, slice (FromUnstructured's words)
    struct: str  # the Go struct holding the field, e.g. ObjectMeta
    path: str  # JSON names from the top, without list indexes, e.g. metadata.labels
    go_type: str  # e.g. string, map[string]string, []v1.Taint

    def json_message(self) -> str:
        return (
            f"json: cannot unmarshal {self.json_type} into Go struct field "
            f"{self.struct}.{self.path} of type {self.go_type}"
        )

    def convert_message(self) -> str:
        return f"cannot convert {self.python_type} to {self.go_type}"


@dataclass
class Decoded:
    obj: dict[str, Any]
    unknown: list[str] = field(default_factory=list)  # e.g. spec.taints[0].foo
    mismatch: TypeMismatch | None = None


@functools.cache
def _fields(model: str) -> dict[str, str]:
    """JSON name -> client type string, for one model class."""
    cls = getattr(models, model)
    return {json_name: cls.openapi_types[attr] for attr, json_name in cls.attribute_map.items()}


@functools.cache
def _go_name(model: str) -> str:
    return re.sub(r"^(V\d+(alpha\d+|beta\d+)?|CoreV\d+)", "", model)


@functools.cache
def _shape(type_: str) -> tuple[str, str]:
    """("list" | "map" | "other", the item type) for a client type string."""
    if match := _LIST.match(type_):
        return "list", match.group(1)
    if match := _DICT.match(type_):
        return "map", match.group(1)
    return "other", ""


def _go_type(type_: str) -> str:
    if type_ in _SCALARS:
        return _SCALARS[type_]
    if match := _LIST.match(type_):
        return "[]" + _go_type(match.group(1))
    if match := _DICT.match(type_):
        return "map[string]" + _go_type(match.group(1))
    if type_ == "datetime":
        return "v1.Time"
    return "v1." + _go_name(type_)


def _json_type(value: Any) -> tuple[str, str]:
    if isinstance(value, bool):
        return "bool", "bool"
    if isinstance(value, int):
        return "number", "int64"
    if isinstance(value, float):
        return "number", "float64"
    if isinstance(value, str):
        return "string", "string"
    if isinstance(value, list):
        return "array", "slice"
    return "object", "map"


class CleanSubtrees:
    """Lists and maps known to decode to themselves (no unknown field, no value of the wrong
    type, nothing dropped or converted), by identity, with the type and omitempty context
    they were checked in.

    A PATCH's patched object shares every subtree its patch did not touch with the stored
    object (the patch functions copy only along the patched paths, and stored objects are
    never mutated: store.py), so with this the decoding of the next PATCH of the same
    object walks only what changed. Each entry holds its object, so its id cannot be reused
    while it is known. Only objects that go on to be stored may be added: a caller that
    mutates what it decoded (a create's defaults) must not pass one.
    """

    LIMIT = 200_000  # entries; then forgotten at once (the next writes walk again)

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, str, str, frozenset[str]]] = {}

    def holds(self, value: Any, type_: str, zero_path: str, zero_paths: frozenset[str]) -> bool:
        found = self._known.get(id(value))
        return (
            found is not None
            and found[0] is value
            and found[1] == type_
            and found[2] == zero_path
            and found[3] is zero_paths
        )

    def add(self, value: Any, type_: str, zero_path: str, zero_paths: frozenset[str]) -> None:
        if len(self._known) >= self.LIMIT:
            self._known.clear()
        self._known[id(value)] = (value, type_, zero_path, zero_paths)


_EMPTY: frozenset[str] = frozenset()


def decode(kind: str, obj: dict[str, Any], *, clean: CleanSubtrees | None = None) -> Decoded:
    """Check `obj` against its kind's schema; the result holds what the server would store.
    Whatever decodes to itself is returned as the same object (the result shares it with
    `obj`). `clean`: subtrees already known to decode to themselves, skipped, and where the
    ones found on this walk are added."""
    model = MODELS.get(kind)
    if model is None:
        return Decoded(obj)
    walker = _Walker(OMIT_ZERO.get(kind, _EMPTY), clean)
    cleaned = walker.model(obj, model, "", "", "")
    return Decoded(cleaned, walker.unknown, walker.mismatch)


class _Walker:
    def __init__(self, zero_paths: frozenset[str], clean: CleanSubtrees | None = None) -> None:
        self.zero_paths = zero_paths
        self.clean = clean
        self.unknown: list[str] = []
        self.mismatch: TypeMismatch | None = None

    def model(
        self, value: dict[str, Any], model: str, path: str, go_path: str, zero_path: str
    ) -> dict[str, Any]:
        if self.clean is not None and self.clean.holds(value, model, zero_path, self.zero_paths):
            return value
        unknown = len(self.unknown)
        fields = _fields(model)
        struct = _go_name(model)
        result: dict[str, Any] = {}
        same = True  # so far, the result is `value`'s contents
        for key, original in value.items():
            child = f"{path}.{key}" if path else key
            type_ = fields.get(key)
            if type_ is None:
                self.unknown.append(child)
                same = False
                continue
            item = original
            if (model, key) in QUANTITY_MAPS and isinstance(item, dict):
                converted = {k: quantity_string(v) for k, v in item.items()}
                if any(converted[k] is not v for k, v in item.items()):
                    item = converted
            elif (model, key) in QUANTITY_FIELDS:
                item = quantity_string(item)
            go_child = f"{go_path}.{key}" if go_path else key
            zero_child = f"{zero_path}.{key}" if zero_path else key
            item = self.value(item, type_, struct, child, go_child, zero_child)
            if self._omitted(key, item, type_, zero_child):
                same = False
            else:
                result[key] = item
                same = same and item is original
        if not same:
            return result
        self._known_clean(value, model, zero_path, unknown)
        return value

    def _known_clean(self, value: Any, type_: str, zero_path: str, unknown: int) -> None:
        """`value` decoded to itself: remember it, unless something in it was reported."""
        if self.clean is not None and self.mismatch is None and len(self.unknown) == unknown:
            self.clean.add(value, type_, zero_path, self.zero_paths)

    def value(
        self, value: Any, type_: str, struct: str, path: str, go_path: str, zero_path: str
    ) -> Any:
        if value is None or type_ == "object":
            return value
        shape, inner = _shape(type_)
        if type_ in ("str", "datetime"):
            ok = isinstance(value, str)
        elif type_ == "bool":
            ok = isinstance(value, bool)
        elif type_ in ("int", "float"):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif shape == "list":
            if not isinstance(value, list):
                ok = False
            else:
                return self._list(value, type_, inner, struct, path, go_path, zero_path)
        elif shape == "map":
            if not isinstance(value, dict):
                ok = False
            else:
                return self._map(value, type_, inner, struct, path, go_path, zero_path)
        elif isinstance(value, dict):
            return self.model(value, type_, path, go_path, zero_path)
        else:
            ok = False
        if not ok and self.mismatch is None:
            json_type, python_type = _json_type(value)
            self.mismatch = TypeMismatch(json_type, python_type, struct, go_path, _go_type(type_))
        return value

    def _list(
        self,
        value: list[Any],
        type_: str,
        inner: str,
        struct: str,
        path: str,
        go_path: str,
        zero_path: str,
    ) -> list[Any]:
        if self.clean is not None and self.clean.holds(value, type_, zero_path, self.zero_paths):
            return value
        unknown = len(self.unknown)
        items = zero_path + "[]"
        result = [
            self.value(v, inner, struct, f"{path}[{i}]", go_path, items)
            for i, v in enumerate(value)
        ]
        if any(new is not old for new, old in zip(result, value, strict=True)):
            return result
        self._known_clean(value, type_, zero_path, unknown)
        return value

    def _map(
        self,
        value: dict[str, Any],
        type_: str,
        inner: str,
        struct: str,
        path: str,
        go_path: str,
        zero_path: str,
    ) -> dict[str, Any]:
        if self.clean is not None and self.clean.holds(value, type_, zero_path, self.zero_paths):
            return value
        unknown = len(self.unknown)
        result = {
            k: self.value(v, inner, struct, f"{path}.{k}", go_path, zero_path)
            for k, v in value.items()
        }
        if any(result[k] is not v for k, v in value.items()):
            return result
        self._known_clean(value, type_, zero_path, unknown)
        return value

    def _omitted(self, key: str, value: Any, type_: str, zero_path: str) -> bool:
        if value is None:
            return key not in KEEP_NULL
        if isinstance(value, list) and not value:
            return key not in KEEP_EMPTY
        if isinstance(value, dict) and not value and _shape(type_)[0] == "map":
            return True
        return bool(zero_path in self.zero_paths and (value == "" or value is False))


def quantity_string(value: Any) -> Any:
    """A JSON number given for a Quantity, as the server serialises it back (`1` -> "1",
    `0.5` -> "500m"); anything else is left for the type check."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    for scale, suffix in ((1000, "m"), (1_000_000, "u"), (1_000_000_000, "n")):
        scaled = round(value * scale, 6)
        if scaled.is_integer():
            return f"{int(scaled)}{suffix}"
    # Below a nano, a Quantity rounds up to the next nano.
    return f"{math.ceil(value * 1_000_000_000)}n"


def go_print(value: Any) -> str:
    """A JSON value printed as Go's `%+v` prints the decoded map (sorted keys, bare strings)."""
    if isinstance(value, dict):
        inner = " ".join(f"{k}:{go_print(value[k])}" for k in sorted(value))
        return f"map[{inner}]"
    if isinstance(value, list):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
