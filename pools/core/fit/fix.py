"""The fix: a pool's scheduling block merged into every pod template of a manifest (pure).

For each pod template, keeping everything the user wrote and adding nothing twice:

- Required node affinity on `<pool key> In [<pool>]`. Required terms are ORed, so the
  requirement goes into *every* term (a term that already constrains the pool key is corrected
  to the pool); with no required affinity, one term is added — unless `nodeSelector` already
  pins the pool. A `nodeSelector` on the pool key naming another pool is corrected too, since
  it is ANDed with the affinity.
- The toleration for the pool's taint (`Equal` with its value, `Exists` when it has none),
  unless an existing toleration already tolerates it.

Required, not preferred, affinity: preferred affinity isolates nothing. The result is written
back in the submitted format (YAML or JSON); PyYAML does not keep comments, so the diff is
against the submitted manifest as re-serialised, which shows exactly what the fix changes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pools.core.fit.cluster import FitPool
from pools.core.fit.fix_text import Dumping, ManifestText, yaml_text
from pools.core.fit.scheduling import EQUAL, EXISTS, Toleration, tolerated
from pools.core.fit.text_diff import unified_diff
from pools.core.fit.workloads import JSON, Location, Manifest
from pools.core.taints import Taint

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class Fix:
    pool: str
    text: str  # the whole manifest with the pool's scheduling block merged in
    diff: str  # unified diff against the submitted manifest, as re-serialised
    changed: tuple[str, ...] = ()  # "document 1: spec.template.spec" for each template touched

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "text": self.text,
            "diff": self.diff,
            "changed": list(self.changed),
        }


def scheduling_fixes(
    manifest: Manifest, pools: Iterable[FitPool], pool_key: str, *, dump: Dumping | None = None
) -> dict[str, Fix]:
    """One fix per pool. The manifest is serialised once, and each pool's fix spliced into
    that text (`pools.core.fit.fix_text`); a manifest that cannot be is written whole."""
    dump = dump if dump is not None else Dumping()
    text = ManifestText.of(manifest, dump)
    if text is None:
        before = serialise(list(manifest.documents), manifest.format)
        return {
            pool.name: scheduling_fix(manifest, pool, pool_key, before=before) for pool in pools
        }
    fixes = {}
    for pool in pools:
        specs, changed = [], []
        for workload in manifest.workloads:
            for template in workload.templates:
                spec = _scheduling_copy(
                    _at(manifest.documents[workload.document - 1], template.location)
                )
                if merge_scheduling_block(spec, pool, pool_key):
                    changed.append(f"document {workload.document}: {template.path}")
                specs.append(spec)
        after = text.after(specs)
        if after is None:
            fixes[pool.name] = scheduling_fix(manifest, pool, pool_key, before=text.before)
            continue
        diff = unified_diff(text.before, after, "submitted", f"fixed for pool {pool.name}")
        fixes[pool.name] = Fix(pool.name, after, diff, tuple(changed))
    return fixes


def _scheduling_copy(spec: dict[str, Any]) -> dict[str, Any]:
    """A pod spec `merge_scheduling_block` can change without touching the submitted one: a
    copy of the mappings it sets keys in (the spec, its nodeSelector, the affinity down to the
    required terms, each term). Lists it extends it replaces, and the rest is shared: copying
    all of it for every pool cost more than the fix (issue 25, R1)."""
    copied = dict(spec)
    if isinstance(copied.get("nodeSelector"), dict):
        copied["nodeSelector"] = dict(copied["nodeSelector"])
    affinity = copied.get("affinity")
    if not isinstance(affinity, dict):
        return copied
    affinity = copied["affinity"] = dict(affinity)
    node = affinity.get("nodeAffinity")
    if not isinstance(node, dict):
        return copied
    node = affinity["nodeAffinity"] = dict(node)
    required = node.get(REQUIRED)
    if not isinstance(required, dict):
        return copied
    required = node[REQUIRED] = dict(required)
    terms = required.get("nodeSelectorTerms")
    if isinstance(terms, list):
        required["nodeSelectorTerms"] = [dict(t) if isinstance(t, dict) else t for t in terms]
    return copied


def scheduling_fix(
    manifest: Manifest, pool: FitPool, pool_key: str, *, before: str | None = None
) -> Fix:
    documents = copy.deepcopy(list(manifest.documents))
    changed = []
    for workload in manifest.workloads:
        for template in workload.templates:
            spec = _at(documents[workload.document - 1], template.location)
            if merge_scheduling_block(spec, pool, pool_key):
                changed.append(f"document {workload.document}: {template.path}")
    if before is None:
        before = serialise(list(manifest.documents), manifest.format)
    after = serialise(documents, manifest.format)
    # Linear in the manifest's length: difflib alone grows with its square (issue 25, R1).
    diff = unified_diff(before, after, "submitted", f"fixed for pool {pool.name}")
    return Fix(pool.name, after, diff, tuple(changed))


def _at(document: Any, location: Location) -> dict[str, Any]:
    node = document
    for step in location:
        node = node[step]
    return node


def serialise(documents: list[Any], fmt: str) -> str:
    present = [d for d in documents if d is not None]
    if fmt == JSON:
        return "\n".join(json.dumps(d, indent=2, ensure_ascii=False) for d in present) + "\n"
    return yaml_text(present)


def merge_scheduling_block(spec: dict[str, Any], pool: FitPool, pool_key: str) -> bool:
    """Merge the pool's affinity and toleration into one pod spec, in place; True if changed."""
    changed = _pin_node_selector(spec, pool.name, pool_key)
    pinned = (spec.get("nodeSelector") or {}).get(pool_key) == pool.name
    if not pinned or _has_required(spec):
        # With nodeSelector pinning the pool, terms only need correcting, not extending.
        changed = _require_pool(spec, pool.name, pool_key, add=not pinned) or changed
    if pool.taint is not None:
        changed = _tolerate(spec, pool.taint) or changed
    return changed


def _pin_node_selector(spec: dict[str, Any], pool: str, pool_key: str) -> bool:
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and pool_key in selector and selector[pool_key] != pool:
        selector[pool_key] = pool
        return True
    return False


def _has_required(spec: dict[str, Any]) -> bool:
    node = ((spec.get("affinity") or {}).get("nodeAffinity")) or {}
    return node.get(REQUIRED) is not None


def _require_pool(spec: dict[str, Any], pool: str, pool_key: str, *, add: bool) -> bool:
    wanted = {"key": pool_key, "operator": "In", "values": [pool]}
    affinity = spec.get("affinity") or {}
    node = affinity.get("nodeAffinity") or {}
    required = node.get(REQUIRED) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        terms = [{"matchExpressions": [wanted]}]
        changed = True
    else:
        changed = False
        for term in terms:
            changed = _require_in_term(term, wanted, add=add) or changed
    required["nodeSelectorTerms"] = terms
    node[REQUIRED] = required
    affinity["nodeAffinity"] = node
    spec["affinity"] = affinity
    return changed


def _require_in_term(term: dict[str, Any], wanted: dict[str, Any], *, add: bool) -> bool:
    expressions = term.get("matchExpressions") or []
    on_key = [e for e in expressions if e.get("key") == wanted["key"]]
    if (
        len(on_key) == 1
        and on_key[0].get("operator") == "In"
        and on_key[0].get("values") == wanted["values"]
    ):
        return False
    if not on_key and not add:
        return False
    # Each term gets its own copy: a list shared by two terms is written as a YAML anchor
    # and aliases (`values: *id001`), which reads badly in a fix.
    requirement = {**wanted, "values": list(wanted["values"])}
    if on_key:
        first = expressions.index(on_key[0])
        expressions = [e for e in expressions if e.get("key") != wanted["key"]]
        expressions.insert(first, requirement)
    else:
        expressions = [*expressions, requirement]
    term["matchExpressions"] = expressions
    return True


def _tolerate(spec: dict[str, Any], taint: Taint) -> bool:
    existing = [
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or ""),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in spec.get("tolerations") or []
        if isinstance(t, dict)
    ]
    if tolerated(existing, taint):
        return False
    toleration: dict[str, str] = {"key": taint.key, "operator": EQUAL, "value": taint.value}
    if not taint.value:
        toleration = {"key": taint.key, "operator": EXISTS}
    toleration["effect"] = taint.effect
    spec["tolerations"] = [*(spec.get("tolerations") or []), toleration]
    return True
