"""Field ownership (managedFields) and server-side apply, for nodes' labels, annotations,
taints and scheduling fields, with structured-merge-diff's rules and messages.

Every write records who changed what: an update (PATCH, PUT, a controller's write) takes
the fields it added or changed from their previous owners; an apply (`PATCH` with
`application/apply-patch+yaml` and a `fieldManager`) sets the fields its configuration
names, removes those it named last time and no longer does (unless someone else owns
them), and is refused with 409 when it would change a field another manager owns, unless
`force=true`. Labels and annotations are owned key by key; `spec.taints` is an atomic list
(one owner for the whole list). Other fields of an applied configuration are merged without
ownership, and pods record none: see docs/kubesim.md.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from kubesim.errors import ApiError

Path = tuple[str, ...]
MAPS = (("metadata", "labels"), ("metadata", "annotations"))
SCALARS = (
    ("spec", "taints"),
    ("spec", "unschedulable"),
    ("spec", "podCIDR"),
    ("spec", "podCIDRs"),
    ("spec", "providerID"),
)
API_VERSION = "v1"


def fields_of(obj: dict[str, Any], *, with_maps: bool = True) -> dict[Path, Any]:
    """The tracked fields present in `obj` and their values."""
    found: dict[Path, Any] = {}
    for section, name in MAPS:
        values = (obj.get(section) or {}).get(name)
        if isinstance(values, dict):
            if with_maps:
                found[(section, name)] = True
            for key, value in values.items():
                found[(section, name, key)] = value
    for section, name in SCALARS:
        part = obj.get(section) or {}
        if name in part:
            found[(section, name)] = part[name]
    return found


@dataclass
class Manager:
    manager: str
    operation: str  # Apply | Update
    api_version: str
    time: str
    subresource: str = ""
    fields: set[Path] = field(default_factory=set)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        # An applier is the same manager whatever version it applied with.
        version = "" if self.operation == "Apply" else self.api_version
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """printManager: how a conflict names this manager."""
        name = json.dumps(self.manager)
        if self.subresource:
            name += f' with subresource "{self.subresource}"'
        if self.operation == "Update":
            return f"{name} using {self.api_version}"
        return name

    def key(self) -> EntryKey:
        fields = frozenset(self.fields)
        return (self.manager, self.operation, self.api_version, self.time, self.subresource, fields)

    def encode(self) -> dict[str, Any]:
        key = self.key()
        known = _WRITTEN.get(key)
        if known is not None:
            return known
        entry: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": _encode_fields(self.fields),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        if len(_WRITTEN) >= ENTRIES_KEPT:
            _WRITTEN.clear()
            _READ.clear()
        _WRITTEN[key] = entry
        _READ[id(entry)] = (entry, key)
        return entry


EntryKey = tuple[str, str, str, str, str, frozenset[Path]]
# The managedFields entries kubesim wrote, by what they say, and what each says, by its
# identity. Most writes leave most owners as they were, so an owner's entry is the same
# object from one version of an object to the next (and across objects: every node's kubelet
# entry at the same time), neither encoded nor decoded again. Safe to share: stored objects
# are never mutated. Forgotten all at once past ENTRIES_KEPT (then encoded and read again).
ENTRIES_KEPT = 50_000
_WRITTEN: dict[EntryKey, dict[str, Any]] = {}
_READ: dict[int, tuple[dict[str, Any], EntryKey]] = {}


def _encode_fields(paths: set[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(f"f:{part}", {})
        if path in MAPS:
            node["."] = {}
    return _sorted_tree(tree)


def _sorted_tree(tree: dict[str, Any]) -> dict[str, Any]:
    keys = sorted(tree, key=lambda k: (k != ".", k))
    return {k: _sorted_tree(tree[k]) for k in keys}


def _decode_fields(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, child in (tree or {}).items():
        if key == ".":
            paths.add(prefix)
            continue
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        if not child or path in SCALARS or len(path) == 3:
            paths.add(path)
        if isinstance(child, dict) and child:
            paths |= _decode_fields(child, path)
    return paths


def managers_of(obj: dict[str, Any]) -> list[Manager]:
    result = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        known = _READ.get(id(entry))
        if known is not None and known[0] is entry:
            manager, operation, api_version, time, subresource, fields = known[1]
            result.append(Manager(manager, operation, api_version, time, subresource, set(fields)))
            continue
        if not isinstance(entry, dict) or not entry.get("manager"):
            continue
        result.append(
            Manager(
                str(entry["manager"]),
                str(entry.get("operation") or "Update"),
                str(entry.get("apiVersion") or API_VERSION),
                str(entry.get("time") or ""),
                str(entry.get("subresource") or ""),
                _decode_fields(entry.get("fieldsV1") or {}),
            )
        )
    return result


def _store(obj: dict[str, Any], managers: list[Manager]) -> dict[str, Any]:
    kept = [m for m in managers if m.fields]
    kept.sort(key=lambda m: (m.operation, m.time, m.manager, m.api_version, m.subresource))
    meta = dict(obj.get("metadata") or {})
    if kept:
        meta["managedFields"] = [m.encode() for m in kept]
    else:
        meta.pop("managedFields", None)
    return {**obj, "metadata": meta}


@dataclass
class Comparison:
    added: set[Path]
    modified: set[Path]
    removed: set[Path]

    @property
    def changed(self) -> set[Path]:
        return self.added | self.modified


def compare(old: dict[str, Any] | None, new: dict[str, Any]) -> Comparison:
    before = fields_of(old) if old else {}
    after = fields_of(new)
    return Comparison(
        added={p for p in after if p not in before},
        modified={p for p in after if p in before and before[p] != after[p]},
        removed={p for p in before if p not in after},
    )


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    now: str,
    subresource: str = "",
) -> dict[str, Any]:
    """`new` with managedFields after `manager` changed `old` into it (an Update)."""
    managers = managers_of(old) if old else []
    change = compare(old, new)
    me = Manager(manager, "Update", API_VERSION, now, subresource)
    for other in managers:
        if other.identity == me.identity:
            me = other
            continue
        other.fields -= change.changed | change.removed
    before = set(me.fields)
    me.fields = (me.fields - change.removed) | change.changed
    if me.fields != before:
        me.time = now
    if me not in managers:
        managers.append(me)
    return _store(new, managers)


def _merge(live: Any, config: Any) -> Any:
    """Apply's merge: maps merge key by key, lists and scalars are replaced."""
    if isinstance(live, dict) and isinstance(config, dict):
        merged = dict(live)
        for key, value in config.items():
            merged[key] = _merge(live.get(key), value)
        return merged
    return copy.deepcopy(config)


def _remove(obj: dict[str, Any], path: Path) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(path[-1], None)


def server_side_apply(
    live: dict[str, Any] | None,
    config: dict[str, Any],
    manager: str,
    *,
    force: bool,
    now: str,
) -> dict[str, Any]:
    """The object after `manager` applied `config` to `live` (None: create)."""
    managers = managers_of(live) if live else []
    base = copy.deepcopy(live) if live else {}
    config = {k: v for k, v in config.items() if k not in ("status",)}
    meta = {
        k: v
        for k, v in (config.get("metadata") or {}).items()
        if k in ("labels", "annotations", "name")
    }
    merged = _merge(base, {**config, "metadata": meta})
    me = Manager(manager, "Apply", API_VERSION, now)
    previous: set[Path] = set()
    for existing in managers:
        if existing.identity == me.identity:
            me, previous = existing, set(existing.fields)
    applied = set(fields_of(config, with_maps=False))
    others = [m for m in managers if m is not me]
    owned_by_others = set().union(*(m.fields for m in others)) if others else set()
    for path in previous - applied - owned_by_others:
        _remove(merged, path)
    change = compare(live, merged)
    conflicts = [(m, p) for m in others for p in sorted(m.fields & change.changed)]
    if conflicts and not force:
        raise apply_conflict(conflicts)
    for other in others:
        other.fields -= change.changed | change.removed
    me.fields = applied
    me.api_version = str(config.get("apiVersion") or API_VERSION)
    if me.fields != previous:
        me.time = now
    if me not in managers:
        managers.append(me)
    for section, name in MAPS:
        if (merged.get(section) or {}).get(name) == {}:
            merged[section].pop(name)
    return _store(merged, managers)


def path_text(path: Path) -> str:
    return "".join(f".{part}" for part in path)


def apply_conflict(conflicts: list[tuple[Manager, Path]]) -> ApiError:
    """409 as internal.NewConflictError words it."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {m.describe()}",
            "field": path_text(p),
        }
        for m, p in conflicts
    ]
    if len(conflicts) == 1:
        m, p = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {m.describe()}: {path_text(p)}"
    else:
        by_manager: dict[str, list[Path]] = {}
        names: dict[str, Manager] = {}
        for m, p in conflicts:
            key = json.dumps(m.identity)
            by_manager.setdefault(key, []).append(p)
            names[key] = m
        lines = []
        for key in sorted(by_manager):
            lines.append(f"conflicts with {names[key].describe()}:")
            lines += [f"- {path_text(p)}" for p in by_manager[key]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def manager_from(field_manager: str | None, user_agent: str) -> str:
    """managerOrUserAgent: the fieldManager, else the User-Agent up to its first '/'."""
    if field_manager:
        return field_manager
    prefix = user_agent.split("/")[0]
    return "".join(ch for ch in prefix if ch.isprintable())[:128]
