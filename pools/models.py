"""Domain models: pools and the inventory snapshot of GPU nodes.

MoveRequest, Approval and AuditEvent arrive with the move workflow.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from pools.kube import names
from pools.kube.desired import PoolSpec, Taint


class PoolQuerySet(models.QuerySet["Pool"]):
    def active(self) -> PoolQuerySet:
        return self.filter(retired_at__isnull=True)


class Pool(models.Model):
    name = models.CharField(
        max_length=63,
        unique=True,
        help_text="A DNS label; nodes in the pool carry <pool key>=<name>.",
    )
    display_name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    labels = models.JSONField(
        default=dict,
        blank=True,
        help_text="Labels the pool's nodes carry besides the pool key, e.g. workload-type.",
    )
    taint_key = models.CharField(max_length=317, blank=True)
    taint_value = models.CharField(max_length=63, blank=True)
    taint_effect = models.CharField(
        max_length=20, blank=True, choices=[(e, e) for e in names.TAINT_EFFECTS]
    )
    min_nodes = models.PositiveIntegerField(
        default=0, help_text="The floor no move may take the pool below."
    )
    accepted_gpu_models = models.JSONField(
        default=list,
        blank=True,
        help_text="nvidia.com/gpu.product values the pool accepts; empty accepts any.",
    )
    approvals_required = models.PositiveSmallIntegerField(default=1)
    requires_healthy_nodes = models.BooleanField(
        default=False, help_text="Refuse nodes with XID errors or without metrics."
    )
    retired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = PoolQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def taint(self) -> Taint | None:
        if not self.taint_key:
            return None
        return Taint(self.taint_key, self.taint_value, self.taint_effect)

    def spec(self) -> PoolSpec:
        return PoolSpec(self.name, dict(self.labels), self.taint)

    def clean(self) -> None:
        errors = pool_definition_errors(self, Pool.objects.active().exclude(pk=self.pk))
        if errors:
            raise ValidationError(errors)


def pool_definition_errors(pool: Pool, others: Any) -> dict[str, list[str]]:
    """Everything wrong with a pool definition, by field: what Kubernetes would refuse, and
    what would make two pools indistinguishable on a node."""
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if problem := names.dns_label_problem(pool.name or ""):
        add("name", f"Pool name {pool.name!r} {problem}.")
    pool_key = settings.POOL_LABEL_KEY
    if not isinstance(pool.labels, dict):
        add("labels", "Labels must be a mapping of keys to values.")
    else:
        for key, value in pool.labels.items():
            if key == pool_key:
                add("labels", f"{key!r} is the pool key; it is set from the pool's name.")
            elif problem := names.label_key_problem(key):
                add("labels", f"Label key {key!r}: {problem}.")
            if not isinstance(value, str):
                add("labels", f"Label {key!r}: the value must be a string.")
            elif problem := names.label_value_problem(value):
                add("labels", f"Label {key}={value!r}: the value {problem}.")
    if pool.taint_key or pool.taint_value or pool.taint_effect:
        if not pool.taint_key:
            add("taint_key", "A taint needs a key.")
        elif problem := names.label_key_problem(pool.taint_key):
            add("taint_key", f"Taint key {pool.taint_key!r}: {problem}.")
        if problem := names.label_value_problem(pool.taint_value or ""):
            add("taint_value", f"Taint value {pool.taint_value!r} {problem}.")
        if problem := names.taint_effect_problem(pool.taint_effect or ""):
            add("taint_effect", f"Taint effect {problem}.")
    if not isinstance(pool.accepted_gpu_models, list) or not all(
        isinstance(m, str) for m in pool.accepted_gpu_models
    ):
        add("accepted_gpu_models", "Accepted GPU models must be a list of product names.")
    else:
        for model in pool.accepted_gpu_models:
            if problem := names.label_value_problem(model):
                add("accepted_gpu_models", f"GPU model {model!r}: {problem}.")
    if pool.approvals_required is not None and pool.approvals_required < 1:
        add("approvals_required", "A move needs at least one approval.")
    if errors:
        return errors
    for other in others:
        if other.name == pool.name:
            add("name", f"A pool named {pool.name!r} exists already.")
        if pool.taint_key and other.taint_key == pool.taint_key:
            add(
                "taint_key",
                f"Taint key {pool.taint_key!r} is already pool "
                f"{other.name!r}'s: a node could not tell the two pools apart.",
            )
        shared = sorted(k for k, v in pool.labels.items() if other.labels.get(k) == v)
        if shared:
            claimed = ", ".join(f"{k}={pool.labels[k]}" for k in shared)
            add("labels", f"{claimed} is already claimed by pool {other.name!r}.")
    return errors


class NodeQuerySet(models.QuerySet["Node"]):
    def present(self) -> NodeQuerySet:
        return self.filter(gone_at__isnull=True)


class Node(models.Model):
    """The last snapshot of a GPU node, as the inventory sync saw it."""

    name = models.CharField(max_length=253, unique=True)
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="nodes"
    )
    pool_label = models.CharField(
        max_length=63, blank=True, help_text="The pool key's raw value ('' when unassigned)."
    )
    gpu_model = models.CharField(max_length=100, blank=True)
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_memory_mib = models.PositiveIntegerField(default=0)
    gpu_allocatable = models.PositiveIntegerField(default=0)
    gpu_allocated = models.PositiveIntegerField(default=0)
    cpu_allocatable = models.CharField(max_length=32, blank=True)
    memory_allocatable = models.CharField(max_length=32, blank=True)
    ready = models.BooleanField(default=False)
    cordoned = models.BooleanField(default=False)
    labels = models.JSONField(default=dict)
    taints = models.JSONField(default=list)
    drifted = models.BooleanField(default=False)
    drift = models.JSONField(default=dict, blank=True)
    pods = models.JSONField(default=list)
    resource_version = models.CharField(max_length=64, blank=True)
    last_seen = models.DateTimeField()
    gone_at = models.DateTimeField(null=True, blank=True)

    objects = NodeQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["pool", "name"]), models.Index(fields=["gone_at"])]

    def __str__(self) -> str:
        return self.name

    @property
    def gpus_free(self) -> int:
        return max(0, self.gpu_allocatable - self.gpu_allocated)

    def taint_objects(self) -> list[Taint]:
        return [Taint.from_api(t) for t in self.taints]
