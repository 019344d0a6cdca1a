"""What a pool definition must satisfy (pure): what Kubernetes would refuse on a node, and
what would make two pools indistinguishable there.

Checked before anything is saved, so a bad definition is refused with the field and the
reason instead of failing later on every node it would be applied to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from pools.core import names
from pools.core.devices import layout_problem
from pools.core.owned_keys import ownership_problems
from pools.core.palette import colour_problem


class PoolDefinition(Protocol):
    """The fields of a pool a pool admin defines (pools.models.Pool is one)."""

    name: str
    labels: Any  # a mapping of label keys to values, once valid
    taint_key: str
    taint_value: str
    taint_effect: str
    accepted_gpu_models: Any  # a list of GPU product names, once valid
    accepted_gpu_layouts: Any  # a list of layouts (pools.core.devices), once valid
    approvals_required: int | None
    colour: str


Errors = dict[str, list[str]]


def _add(errors: Errors, field: str, message: str) -> None:
    errors.setdefault(field, []).append(message)


def _label_errors(labels: Any, pool_key: str, errors: Errors) -> None:
    if not isinstance(labels, Mapping):
        _add(errors, "labels", "Labels must be a mapping of keys to values.")
        return
    for key, value in labels.items():
        if key == pool_key:
            _add(errors, "labels", f"{key!r} is the pool key; it is set from the pool's name.")
        elif problem := names.label_key_problem(key):
            _add(errors, "labels", f"Label key {key!r}: {problem}.")
        if not isinstance(value, str):
            _add(errors, "labels", f"Label {key!r}: the value must be a string.")
        elif problem := names.label_value_problem(value):
            _add(errors, "labels", f"Label {key}={value!r}: the value {problem}.")


def _taint_errors(pool: PoolDefinition, errors: Errors) -> None:
    if not (pool.taint_key or pool.taint_value or pool.taint_effect):
        return
    if not pool.taint_key:
        _add(errors, "taint_key", "A taint needs a key.")
    elif problem := names.label_key_problem(pool.taint_key):
        _add(errors, "taint_key", f"Taint key {pool.taint_key!r}: {problem}.")
    if problem := names.label_value_problem(pool.taint_value or ""):
        _add(errors, "taint_value", f"Taint value {pool.taint_value!r} {problem}.")
    if problem := names.taint_effect_problem(pool.taint_effect or ""):
        _add(errors, "taint_effect", f"Taint effect {problem}.")


def _model_errors(models: Any, errors: Errors) -> None:
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        _add(errors, "accepted_gpu_models", "Accepted GPU models must be a list of product names.")
        return
    for model in models:
        if problem := names.label_value_problem(model):
            _add(errors, "accepted_gpu_models", f"GPU model {model!r}: {problem}.")


def _layout_errors(layouts: Any, errors: Errors) -> None:
    field = "accepted_gpu_layouts"
    if not isinstance(layouts, list):
        _add(errors, field, "Accepted GPU layouts must be a list: whole, shared, mig-<profile>.")
        return
    for layout in layouts:
        if problem := layout_problem(layout):
            _add(errors, field, f"GPU layout {layout!r} {problem}.")


def _clash_errors(pool: PoolDefinition, others: Iterable[PoolDefinition], errors: Errors) -> None:
    for other in others:
        if other.name == pool.name:
            _add(errors, "name", f"A pool named {pool.name!r} exists already.")
        if pool.taint_key and other.taint_key == pool.taint_key:
            _add(
                errors,
                "taint_key",
                f"Taint key {pool.taint_key!r} is already pool "
                f"{other.name!r}'s: a node could not tell the two pools apart.",
            )
        shared = sorted(k for k, v in pool.labels.items() if other.labels.get(k) == v)
        if shared:
            claimed = ", ".join(f"{k}={pool.labels[k]}" for k in shared)
            _add(errors, "labels", f"{claimed} is already claimed by pool {other.name!r}.")


def definition_errors(
    pool: PoolDefinition, others: Iterable[PoolDefinition], *, pool_key: str
) -> Errors:
    """Everything wrong with `pool`, by field; `others` are the other active pools and
    `pool_key` the node label that names a node's pool. Clashes with other pools are
    looked for only once the definition itself is valid."""
    errors: Errors = {}
    if problem := names.dns_label_problem(pool.name or ""):
        _add(errors, "name", f"Pool name {pool.name!r} {problem}.")
    _label_errors(pool.labels, pool_key, errors)
    _taint_errors(pool, errors)
    if isinstance(pool.labels, Mapping):
        for field, problems in ownership_problems(pool.labels, pool.taint_key or "").items():
            errors.setdefault(field, []).extend(problems)
    _model_errors(pool.accepted_gpu_models, errors)
    _layout_errors(pool.accepted_gpu_layouts, errors)
    if pool.colour and (problem := colour_problem(pool.colour)):
        _add(errors, "colour", f"Colour {pool.colour!r} {problem}.")
    if pool.approvals_required is not None and pool.approvals_required < 1:
        _add(errors, "approvals_required", "A move needs at least one approval.")
    if not errors:
        _clash_errors(pool, others, errors)
    return errors
