"""The text of the submitted manifest and of every pool's fix, written once and spliced (pure).

The fix changes three keys of each pod spec (`nodeSelector`, `affinity`, `tolerations`), and
mostly by appending: a requirement to every term, a toleration to the list. Writing the whole
manifest again for every pool made the fit check cost several serialisations of it (issue 25,
R1). Here the manifest is written once, as a skeleton with marker lines:

- around each scheduling key a pod spec has (`BEGIN`, `END`), and where the fix may add one
  (`ABSENT`, after the spec's last key, as the fix appends it);
- after the last item of every non-empty list of mappings inside those keys (`APPEND`).

The submitted text is the skeleton without its marker lines. A pool's fix replaces a marker
line by what the fix appends there, or the lines between `BEGIN` and `END` by the key written
again when the fix changed it some other way; only those pieces are serialised per pool, each
once per distinct value and column.

This relies on how a block mapping or sequence is emitted: entry after entry, each starting on
its own line, and a nested value written as at the top level shifted right by its column (the
width shortened by as much). `ManifestText.of` answers None — the caller writes the manifest
whole — where that does not hold or cannot be checked: JSON, aliases (anchors are numbered in
the whole document), an empty or flow-style pod spec, columns past the width, or a marker that
is not found exactly where it was put.
"""

from __future__ import annotations

import io
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from pools.core.fit.workloads import YAML, Location, Manifest

SCHEDULING_KEYS = ("nodeSelector", "affinity", "tolerations")
APPENDED = ("affinity", "tolerations")  # the keys the fix may add to a spec, in its order
WIDTH = 100
MARK = "fit-fix-slot-"
BEGIN, END, ABSENT, APPEND = "begin", "end", "absent", "append"
_MARKER_LINE = re.compile(rf"^( *)(- )?{MARK}(\d+)(: x)?\n", re.MULTILINE)
_LINE_START = re.compile(r"^(?=.)", re.MULTILINE)


@dataclass(frozen=True)
class _Marker:
    kind: str
    template: int
    key: str
    path: Location = ()  # APPEND: the list's place inside the key's value


class ManifestText:
    """The skeleton's pieces: `parts[i]` is text, `markers[i]` the marker line after it."""

    def __init__(
        self,
        specs: Sequence[dict[str, Any]],
        parts: list[str],
        markers: list[tuple[_Marker, int]],  # the marker, and its column
        dump: Dumping,
    ) -> None:
        self.specs = specs
        self.parts = parts
        self.markers = markers
        self.dump = dump
        self.before = "".join(parts)
        self.appendable = {
            (m.template, m.key, m.path) for m, _ in markers if m.kind == APPEND
        }  # the lists with a marker after their last item

    @classmethod
    def of(cls, manifest: Manifest, dump: Dumping) -> ManifestText | None:
        if manifest.format != YAML:
            return None
        documents = list(manifest.documents)
        specs: list[dict[str, Any]] = []
        table: list[_Marker] = []
        copies: dict[int, Any] = {}
        watched: set[int] = set()  # the specs and their scheduling values, as submitted
        try:
            for workload in manifest.workloads:
                for template in workload.templates:
                    spec = _at(documents[workload.document - 1], template.location)
                    if not isinstance(spec, dict) or not spec or id(spec) in watched:
                        return None
                    watched.add(id(spec))
                    index = workload.document - 1
                    documents[index] = _path_copy(documents[index], template.location, copies)
                    _at(documents[index], template.location[:-1])[template.location[-1]] = (
                        _skeleton_spec(spec, len(specs), table, watched)
                    )
                    specs.append(spec)
            text = dump.documents(documents, watched=watched)
        except _Shared:
            return None
        if text.count(MARK) != len(table):
            return None  # a value of the manifest holds the token: write it whole
        parts, markers, position = [], [], 0
        for match in _MARKER_LINE.finditer(text):
            number = int(match[3])
            marker = table[number] if number < len(table) else None
            item, pair = bool(match[2]), bool(match[4])
            if marker is None or (item, pair) != (marker.kind == APPEND, marker.kind != APPEND):
                return None
            column = len(match[1])
            if WIDTH - column <= 4:  # the emitter's floor on the width: no shifting past it
                return None
            parts.append(text[position : match.start()])
            markers.append((marker, column))
            position = match.end()
        parts.append(text[position:])
        if len(markers) != len(table):
            return None
        return cls(specs, parts, markers, dump)

    def after(self, fixed: Sequence[dict[str, Any]]) -> str | None:
        """The manifest with each template's pod spec replaced by its fixed copy (same order),
        or None when a fixed spec is not the original with the fix's keys changed or added."""
        changes: dict[int, dict[str, Any]] = {}  # template -> {key: appended or replaced}
        marked = self.appendable
        for number, (spec, new) in enumerate(zip(self.specs, fixed, strict=True)):
            added = [k for k in APPENDED if k not in spec and k in new]
            if list(new) != [*spec, *added]:
                return None
            change: dict[str, Any] = {key: _Whole(new[key]) for key in added}
            for key in SCHEDULING_KEYS:
                if key in spec:
                    appends: dict[Location, list[Any]] = {}
                    if not _appended_only(spec[key], new[key], (), appends) or any(
                        (number, key, path) not in marked for path in appends
                    ):
                        change[key] = _Whole(new[key])
                    elif appends:
                        change[key] = appends
            if change:
                changes[number] = change
        out: list[str] = []
        skipping = False
        for part, (marker, column) in zip(self.parts, self.markers, strict=False):
            if not skipping:
                out.append(part)
            change = changes.get(marker.template, {}).get(marker.key)
            if marker.kind == BEGIN and isinstance(change, _Whole):
                out.append(self.dump.pair(marker.key, change.value, column))
                skipping = True
            elif marker.kind == END:
                skipping = False
            elif marker.kind == ABSENT and isinstance(change, _Whole):
                out.append(self.dump.pair(marker.key, change.value, column))
            elif marker.kind == APPEND and isinstance(change, dict) and marker.path in change:
                out.append(self.dump.items(change[marker.path], column))
        out.append(self.parts[-1])
        return "".join(out)


@dataclass(frozen=True)
class _Whole:
    value: Any  # a key's new value, written in full


class Dumping:
    """YAML written as `fix.serialise` writes it; pieces memoised by value and column."""

    def __init__(self) -> None:
        self._pieces: dict[tuple[str, int, str], str] = {}
        self.calls = 0  # serialisations run (tests count them)

    def documents(self, documents: list[Any], *, watched: set[int]) -> str:
        """The skeleton's text; raises _Shared when an object of `watched` or any mapping or
        list is met twice (a YAML alias: anchors are numbered over the whole document)."""
        self.calls += 1
        return yaml_text([d for d in documents if d is not None], WIDTH, watched=watched)

    def pair(self, key: str, value: Any, column: int) -> str:
        return self._piece(key, {key: value}, column)

    def items(self, items: list[Any], column: int) -> str:
        return self._piece("", items, column)

    def _piece(self, kind: str, value: Any, column: int) -> str:
        memo = (kind, column, repr(value))
        if memo not in self._pieces:
            text = self._dump([value], WIDTH - column)
            # Blank lines (breaks inside a quoted scalar) carry no indentation.
            self._pieces[memo] = _LINE_START.sub(" " * column, text)
        return self._pieces[memo]

    def _dump(self, documents: list[Any], width: int) -> str:
        self.calls += 1
        return yaml_text(documents, width)


def yaml_text(documents: list[Any], width: int = WIDTH, *, watched: set[int] | None = None) -> str:
    """The documents as the fix writes them: block style, keys in their order. The text of
    `yaml.dump_all(documents, Dumper=CSafeDumper, sort_keys=False, default_flow_style=False,
    allow_unicode=True, width=width)`, in a third of the time."""
    stream = io.StringIO()
    dumper = _Dumper(
        stream, default_flow_style=False, allow_unicode=True, width=width, sort_keys=False
    )
    dumper.watched = watched
    try:
        dumper.open()
        for document in documents:
            dumper.represent(document)
        dumper.close()
    finally:
        dumper.dispose()
    return stream.getvalue()


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """libyaml's emitter (when PyYAML has it) with SafeRepresenter's nodes built directly.

    SafeRepresenter goes through five calls per value and asks the resolver twice per scalar;
    here mappings, lists and strings (nearly all of a manifest) are built in one call, as it
    builds them — block style, a node per object, the same node again for an object seen
    twice — and the resolver's answer is kept per scalar text. Other types go its way."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._resolved: dict[tuple[Any, Any], str] = {}
        self.watched: set[int] | None = None

    def represent_data(self, data: Any) -> yaml.Node:
        kind = type(data)
        if kind is str:
            return yaml.ScalarNode(_STR, data)
        Scalar = yaml.ScalarNode
        if kind is not dict and kind is not list:
            return super().represent_data(data)  # type: ignore[no-any-return]
        if self.watched is not None and (
            id(data) in self.represented_objects or id(data) in self.watched
        ):
            raise _Shared
        if id(data) in self.represented_objects:
            return self.represented_objects[id(data)]  # type: ignore[no-any-return]
        self.object_keeper.append(data)
        represent = self.represent_data
        node: yaml.Node
        if kind is dict:
            pairs: list[tuple[yaml.Node, yaml.Node]] = []
            node = yaml.MappingNode(_MAP, pairs, flow_style=self.default_flow_style)
            self.represented_objects[id(data)] = node
            for key, value in data.items():
                pairs.append(
                    (
                        Scalar(_STR, key) if type(key) is str else represent(key),
                        Scalar(_STR, value) if type(value) is str else represent(value),
                    )
                )
        else:
            items: list[yaml.Node] = []
            node = yaml.SequenceNode(_SEQ, items, flow_style=self.default_flow_style)
            self.represented_objects[id(data)] = node
            for value in data:
                items.append(Scalar(_STR, value) if type(value) is str else represent(value))
        return node

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        # Asked twice per scalar by the C serializer: the regular expressions once per text.
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]
        key = (value, implicit)
        if key not in self._resolved:
            self._resolved[key] = super().resolve(kind, value, implicit)
        return self._resolved[key]


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


def _marker(table: list[_Marker], marker: _Marker) -> str:
    table.append(marker)
    return f"{MARK}{len(table) - 1}"


def _skeleton_spec(
    spec: dict[str, Any], template: int, table: list[_Marker], watched: set[int]
) -> dict[str, Any]:
    skeleton: dict[str, Any] = {}
    for key, value in spec.items():
        if key in SCHEDULING_KEYS:
            skeleton[_marker(table, _Marker(BEGIN, template, key))] = "x"
            skeleton[key] = _with_append_markers(value, template, key, (), table, watched)
            skeleton[_marker(table, _Marker(END, template, key))] = "x"
        else:
            skeleton[key] = value
    for key in APPENDED:
        if key not in spec:
            skeleton[_marker(table, _Marker(ABSENT, template, key))] = "x"
    return skeleton


def _with_append_markers(
    value: Any, template: int, key: str, path: Location, table: list[_Marker], watched: set[int]
) -> Any:
    """`value` with a marker after each list of mappings in it: the containers on the way
    copied (their originals watched, as the dumper will not meet them), the rest itself."""
    if isinstance(value, dict):
        copied: Any = {
            k: _with_append_markers(v, template, key, (*path, k), table, watched)
            if isinstance(v, dict | list)
            else v
            for k, v in value.items()
        }
        if all(copied[k] is v for k, v in value.items()):
            return value
    elif isinstance(value, list) and value:
        copied = [
            _with_append_markers(v, template, key, (*path, i), table, watched)
            if isinstance(v, dict | list)
            else v
            for i, v in enumerate(value)
        ]
        if all(isinstance(item, dict) for item in value):  # what the fix extends
            copied.append(_marker(table, _Marker(APPEND, template, key, path)))
        elif all(map(operator.is_, copied, value)):
            return value
    else:
        return value
    if id(value) in watched:
        raise _Shared
    watched.add(id(value))
    return copied


def _appended_only(old: Any, new: Any, path: Location, appends: dict[Location, list[Any]]) -> bool:
    """Whether `new` is `old` with items appended to some of its non-empty lists (noted in
    `appends` by their path), and nothing else changed."""
    if old is new:
        return True
    if type(old) is not type(new):
        return False
    if isinstance(old, dict):
        if list(old) != list(new):
            return False
        return all(_appended_only(old[k], new[k], (*path, k), appends) for k in old)
    if isinstance(old, list):
        if len(new) < len(old) or (len(new) > len(old) and not old):
            return False
        if all(map(operator.is_, old, new)):  # the fix's lists keep the submitted items
            pass
        elif not all(
            _appended_only(o, n, (*path, i), appends)
            for i, (o, n) in enumerate(zip(old, new, strict=False))
        ):
            return False
        if len(new) > len(old):
            appends[path] = new[len(old) :]
        return True
    return bool(old == new)


def _at(document: Any, location: Location) -> Any:
    node = document
    for step in location:
        node = node[step]
    return node


def _path_copy(document: Any, location: Location, copies: dict[int, Any]) -> Any:
    """The document with the containers from its root to `location` copied (once each), so
    the skeleton's specs can be set in without touching the submitted objects."""
    root = _copy(document, copies)
    node = root
    for step in location[:-1]:
        child = _copy(node[step], copies)
        node[step] = child
        node = child
    return root


def _copy(container: Any, copies: dict[int, Any]) -> Any:
    if id(container) in copies:
        return copies[id(container)]
    copied = dict(container) if isinstance(container, dict) else list(container)
    copies[id(container)] = copied
    copies[id(copied)] = copied
    return copied


class _Shared(Exception):
    """An object met twice while the skeleton is built or written."""
