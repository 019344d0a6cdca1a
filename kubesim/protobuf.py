"""Decoding the few protobuf request bodies kubesim receives.

Typed client-go clients send built-in kinds as protobuf (`kubectl auth can-i` posts its
SelfSubjectAccessReview so) and accept JSON back. A protobuf body is the magic `k8s\\0`
and a runtime.Unknown (typeMeta, raw) whose raw bytes are the object's message, field
numbers as in k8s.io/api's generated.proto. Only the review kinds are decoded.
"""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    pass


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited."""
    result, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        result.append((number, value))
    return result


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _strings(data: bytes, names: dict[int, str]) -> dict[str, str]:
    return {names[n]: v.decode() for n, v in _fields(data) if n in names}


RESOURCE_ATTRIBUTES = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}


def decode_review(body: bytes) -> dict[str, Any]:
    """A SelfSubjectAccessReview or SelfSubjectRulesReview as the JSON the client meant."""
    if not body.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf message")
    unknown = dict(_fields(body[len(MAGIC) :]))
    type_meta = _strings(unknown.get(1, b""), {1: "apiVersion", 2: "kind"})
    kind = type_meta.get("kind", "")
    spec: dict[str, Any] = {}
    for number, value in _fields(unknown.get(2, b"")):
        if number != 2:
            continue
        for inner, part in _fields(value):
            if kind == "SelfSubjectRulesReview" and inner == 1:
                spec["namespace"] = part.decode()
            elif kind == "SelfSubjectAccessReview" and inner == 1:
                spec["resourceAttributes"] = _strings(part, RESOURCE_ATTRIBUTES)
            elif kind == "SelfSubjectAccessReview" and inner == 2:
                spec["nonResourceAttributes"] = _strings(part, NON_RESOURCE_ATTRIBUTES)
    return {**type_meta, "metadata": {}, "spec": spec}
