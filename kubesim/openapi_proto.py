"""The OpenAPI v2 document in protocol buffers, as kubectl asks for it.

client-go reads /openapi/v2 only as gnostic's `openapi.v2.Document` message (Accept
`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`). This writes the parts of
that message the document uses, field numbers as in gnostic's OpenAPIv2.proto; a vendor
extension or a default is an `Any` holding its value as YAML, as gnostic writes them.
"""

from __future__ import annotations

from typing import Any

import yaml


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited field (strings and messages)."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _string(number: int, text: str | None) -> bytes:
    return _field(number, text.encode()) if text else b""


def _strings(number: int, texts: list[str]) -> bytes:
    return b"".join(_field(number, t.encode()) for t in texts)


def _bool(number: int, value: bool) -> bytes:
    return _varint(number << 3) + b"\x01" if value else b""


def _any(value: Any) -> bytes:
    return _string(2, yaml.safe_dump(value, default_flow_style=False))


def _named(number: int, name: str, value: bytes) -> bytes:
    return _field(number, _string(1, name) + _field(2, value))


def _extensions(number: int, obj: dict[str, Any]) -> bytes:
    return b"".join(_named(number, k, _any(v)) for k, v in obj.items() if k.startswith("x-"))


def schema(s: dict[str, Any]) -> bytes:
    out = _string(1, s.get("$ref")) + _string(2, s.get("format"))
    out += _string(4, s.get("description"))
    if "default" in s:
        out += _field(5, _any(s["default"]))
    out += _strings(19, s.get("required", []))
    extra = s.get("additionalProperties")
    if isinstance(extra, dict):
        out += _field(21, _field(1, schema(extra)))
    if "type" in s:
        out += _field(22, _strings(1, [s["type"]]))
    if "items" in s:
        out += _field(23, _field(1, schema(s["items"])))
    out += b"".join(_field(24, schema(part)) for part in s.get("allOf", []))
    if "properties" in s:
        props = b"".join(_named(1, k, schema(v)) for k, v in s["properties"].items())
        out += _field(25, props)
    return out + _extensions(31, s)


def _parameter(p: dict[str, Any]) -> bytes:
    if p["in"] == "body":
        body = _string(1, p.get("description")) + _string(2, p["name"]) + _string(3, "body")
        body += _bool(4, p.get("required", False)) + _field(5, schema(p["schema"]))
        return _field(1, _field(1, body))
    common = _bool(1, p.get("required", False)) + _string(2, p["in"])
    common += _string(3, p.get("description")) + _string(4, p["name"])
    if p["in"] == "query":  # QueryParameterSubSchema: type 6, unique_items 20
        sub = _field(3, common + _string(6, p["type"]) + _bool(20, p.get("uniqueItems", False)))
    else:  # PathParameterSubSchema: type 5, unique_items 19
        sub = _field(4, common + _string(5, p["type"]) + _bool(19, p.get("uniqueItems", False)))
    return _field(1, _field(2, sub))


def _operation(op: dict[str, Any]) -> bytes:
    out = _strings(1, op.get("tags", [])) + _string(3, op.get("description"))
    out += _string(5, op.get("operationId")) + _strings(6, op.get("produces", []))
    out += _strings(7, op.get("consumes", []))
    out += b"".join(_field(8, _parameter(p)) for p in op.get("parameters", []))
    codes = b""
    for code, response in op.get("responses", {}).items():
        body = _string(1, response.get("description"))
        if "schema" in response:
            body += _field(2, _field(1, schema(response["schema"])))
        codes += _named(1, code, _field(1, body))
    out += _field(9, codes) + _strings(10, op.get("schemes", []))
    return out + _extensions(13, op)


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def document(doc: dict[str, Any]) -> bytes:
    info = _string(1, doc["info"]["title"]) + _string(2, doc["info"]["version"])
    paths = b""
    for path, item in doc["paths"].items():
        body = b"".join(
            _field(_METHODS[method], _operation(op))
            for method, op in item.items()
            if method in _METHODS
        )
        paths += _named(2, path, body)
    definitions = b"".join(_named(1, k, schema(v)) for k, v in doc["definitions"].items())
    security = b""
    for requirement in doc.get("security", []):
        named = b"".join(_named(1, k, _strings(1, v)) for k, v in requirement.items())
        security += _field(12, named)
    schemes = b""
    for name, scheme in doc.get("securityDefinitions", {}).items():
        api_key = _string(1, scheme["type"]) + _string(2, scheme["name"])
        api_key += _string(3, scheme["in"]) + _string(4, scheme.get("description"))
        schemes += _named(1, name, _field(2, api_key))
    return (
        _string(1, doc["swagger"])
        + _field(2, info)
        + _field(8, paths)
        + _field(9, definitions)
        + security
        + (_field(13, schemes) if schemes else b"")
    )
