"""The three patch types a client sends, with the Kubernetes semantics of each.

Strategic merge patch merges maps, deletes a key set to null, and replaces lists unless the
Go type declares a merge key for them (`patchStrategy:"merge" patchMergeKey:"..."`). Node
`spec.taints` declares none, so a patch of it replaces the whole list: two writers race and
the last one wins, which is why clients send `metadata.resourceVersion` with it.
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.errors import ApiError

# Paths (dotted, list items marked with []) whose lists merge by a key, from the core/v1 types.
MERGE_KEYS: dict[str, dict[str, str]] = {
    "Node": {
        "status.conditions": "type",
        "status.addresses": "type",
        "metadata.ownerReferences": "uid",
    },
    "Pod": {
        "spec.containers": "name",
        "spec.initContainers": "name",
        "spec.volumes": "name",
        "spec.containers[].env": "name",
        "spec.containers[].ports": "containerPort",
        "spec.containers[].volumeMounts": "mountPath",
        "status.conditions": "type",
        "metadata.ownerReferences": "uid",
    },
}
# Lists of scalars with patchStrategy "merge": the patch's items are added to the set.
MERGE_SETS = {"metadata.finalizers"}


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, kind: str, path: str = "") -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue  # ordering and retain directives do not change what we store
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(result.get(name), list) and isinstance(value, list):
                result[name] = [item for item in result[name] if item not in value]
            continue
        child = f"{path}.{key}" if path else key
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value, kind, child)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, kind, child)
        else:
            result[key] = value
    return result


def _merge_list(current: Any, patch: list[Any], kind: str, path: str) -> list[Any]:
    if path in MERGE_SETS:
        merged = list(current) if isinstance(current, list) else []
        merged += [item for item in patch if item not in merged]
        return merged
    merge_key = MERGE_KEYS.get(kind, {}).get(path)
    if merge_key is None or not isinstance(current, list):
        if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
            return [i for i in patch if not (isinstance(i, dict) and "$patch" in i)]
        return [i for i in copy.deepcopy(patch) if not (isinstance(i, dict) and "$patch" in i)]
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise ApiError(
                422, "Invalid", f"map: {item} does not contain declared merge key: {merge_key}"
            )
        index = next(
            (
                i
                for i, old in enumerate(merged)
                if isinstance(old, dict) and old.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
            continue
        if index is None:
            merged.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            merged[index] = strategic_merge_patch(merged[index], item, kind, f"{path}[]")
    return merged


class _PatchFailed(Exception):
    """An operation json-patch's Apply refuses (its own words, which the server drops)."""


def json_patch(target: Any, operations: Any, validation: str = "Warn") -> Any:
    """RFC 6902. A patch that is not a list of objects is a 400, from patch.go's own strict
    decoding unless fieldValidation is Ignore, else from jsonpatch's. An operation that
    cannot be applied (a failed `test`, a missing path, an unknown op) is answered as
    patch.go answers any error of jsonpatch's Apply: a 422 with NewGenericServerResponse's
    fixed message and empty details, the cause not said."""
    checked = validation in ("Warn", "Strict")
    if operations is None:
        operations = []  # JSON null decodes to an empty patch
    if not isinstance(operations, list):
        go_type = "[]handlers.jsonPatchOp" if checked else "jsonpatch.Patch"
        raise _undecodable(_json_type(operations), go_type, checked)
    for operation in operations:
        if not isinstance(operation, dict):
            go_type = "handlers.jsonPatchOp" if checked else "jsonpatch.Operation"
            raise _undecodable(_json_type(operation), go_type, checked)
    try:
        return _apply(copy.deepcopy(target), operations)
    except _PatchFailed:
        raise ApiError(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
            details={},
        ) from None


def _undecodable(json_type: str, go_type: str, checked: bool) -> ApiError:
    message = f"json: cannot unmarshal {json_type} into Go value of type {go_type}"
    return ApiError(400, "BadRequest", f"error decoding patch: {message}" if checked else message)


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "number"


def _apply(document: Any, operations: list[dict[str, Any]]) -> Any:
    for operation in operations:
        op = operation.get("op")
        path = _pointer(operation.get("path"))
        if op == "add":
            document = _add(document, path, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            document, _ = _remove(document, path)
        elif op == "replace":
            document, _ = _remove(document, path)
            document = _add(document, path, copy.deepcopy(operation.get("value")))
        elif op == "move":
            source = _pointer(operation.get("from", ""))
            document, value = _remove(document, source)
            document = _add(document, path, value)
        elif op == "copy":
            value = copy.deepcopy(_get(document, _pointer(operation.get("from", ""))))
            document = _add(document, path, value)
        elif op == "test":
            if _get(document, path) != operation.get("value"):
                raise _PatchFailed(f"testing value {operation['path']} failed")
        else:
            raise _PatchFailed(f"Unexpected kind: {op}")
    return document


def _pointer(pointer: Any) -> list[str]:
    if pointer == "":
        return []
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise _PatchFailed(f"JSON pointer must start with '/': {pointer!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def _missing(path: list[str]) -> _PatchFailed:
    return _PatchFailed(f'doc is missing path: "/{"/".join(path)}"')


def _parent(document: Any, path: list[str]) -> Any:
    node = document
    for part in path[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _missing(path)
    return node


def _get(document: Any, path: list[str]) -> Any:
    if not path:
        return document
    parent = _parent(document, path)
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _missing(path)


def _add(document: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _parent(document, path)
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise _missing(path)
    else:
        raise _missing(path)
    return document


def _remove(document: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        return None, document
    parent = _parent(document, path)
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        return document, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return document, parent.pop(int(last))
    raise _PatchFailed(f"Unable to remove nonexistent key: {last}: missing value")
