"""Domain models: pools, the inventory snapshot of GPU nodes, moves with their items and
approvals, the append-only audit log, API tokens and idempotency records."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

# current_cluster stays importable from here: migrations 0031 and 0033 name it as a default.
from pools.common.cluster_access import (  # noqa: F401
    current_cluster,
    pool_label_key,
    served_clusters,
)
from pools.core import names
from pools.core.desired import PoolSpec, Target
from pools.core.devices import DEVICE_COLUMNS, NodeDevices, devices_of_row, units_asked
from pools.core.pool_definition import definition_errors
from pools.core.taints import Taint

# Free text people type (a move's reason, a decision's comment, a pool's description): a
# paragraph, not a document. Every form and serializer that takes one reads its limit from
# the model field, so the pages and the API refuse the same text.
FREE_TEXT_MAX_LENGTH = 2000


class ClusterManager(models.Manager[Any]):
    """Reads the current cluster's rows only (current_cluster): lookups by name find the one
    meant when two clusters use the same names, and a sweep run for one cluster sees its
    moves, drills and maintenances only. `everywhere` reads every cluster's; it is also each
    model's default manager, so that a relation (a pool's nodes, a move's node) is followed
    whatever the scope. `cluster_path` leads from the model to the cluster's name."""

    cluster_path = "cluster"

    def get_queryset(self) -> models.QuerySet[Any]:
        scope = cluster_filter(self.model, self.cluster_path, current_cluster())
        return super().get_queryset().filter(scope)


def cluster_filter(model: type[models.Model], path: str, cluster: str) -> models.Q:
    """The rows of `model` whose `path` (`cluster`, or `fk__…__cluster`) is `cluster`, as a
    filter on the model's own columns: a foreign key `IN` a subquery, never a join. A join
    would turn a conditional UPDATE (a move approved only while still pending) into
    `UPDATE … WHERE id IN (SELECT …)`, whose condition PostgreSQL does not check again
    against the row a concurrent transaction just changed: two racing decisions would both
    win."""
    head, _, rest = path.partition("__")
    if not rest:
        return models.Q(**{head: cluster})
    related = model._meta.get_field(head).related_model
    assert isinstance(related, type)
    inner = related._base_manager.filter(cluster_filter(related, rest, cluster))
    return models.Q(**{f"{head}__in": inner.values("pk")})


def in_cluster(path: str, queryset: type[models.QuerySet[Any]] = models.QuerySet) -> Any:
    """A ClusterManager over `queryset` whose rows belong to the cluster at `path`."""
    base = ClusterManager.from_queryset(queryset)
    return type(f"{queryset.__name__}In{path.title()}", (base,), {"cluster_path": path})()


class PoolQuerySet(models.QuerySet["Pool"]):
    def active(self) -> PoolQuerySet:
        return self.filter(retired_at__isnull=True)

    def retired(self) -> PoolQuerySet:
        return self.filter(retired_at__isnull=False)


class Pool(models.Model):
    # Pools belong to one cluster: training in eu-west and training in us-east are two pools,
    # and a node joins only a pool of its own cluster.
    cluster = models.CharField(max_length=63, default=current_cluster)
    name = models.CharField(
        max_length=63,
        help_text="A DNS label, unique in its cluster; nodes in the pool carry <pool key>=<name>.",
    )
    display_name = models.CharField(max_length=100)
    description = models.TextField(blank=True, max_length=FREE_TEXT_MAX_LENGTH)
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
    accepted_gpu_layouts = models.JSONField(
        default=list,
        blank=True,
        help_text="How the pool's nodes may offer their GPUs: whole, shared, mig-<profile> "
        "(e.g. mig-1g.10gb); empty accepts any.",
    )
    approvals_required = models.PositiveSmallIntegerField(default=1)
    requires_healthy_nodes = models.BooleanField(
        default=False, help_text="Refuse nodes with XID errors or without metrics."
    )
    utilisation_target = models.PositiveSmallIntegerField(
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="The average GPU utilisation (%) the pool should reach; the insights "
        "compare the pool's utilisation over weeks with it.",
    )
    colour = models.CharField(
        max_length=7,
        blank=True,
        help_text="#rrggbb on chips and cards; empty picks the first free palette colour.",
    )
    retired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    everywhere = PoolQuerySet.as_manager()
    objects = in_cluster("cluster", PoolQuerySet)

    # What a pool admin defines, in the pool form and the API alike.
    EDITABLE_FIELDS = (
        "name",
        "display_name",
        "description",
        "labels",
        "taint_key",
        "taint_value",
        "taint_effect",
        "min_nodes",
        "accepted_gpu_models",
        "accepted_gpu_layouts",
        "approvals_required",
        "requires_healthy_nodes",
        "utilisation_target",
        "colour",
    )

    class Meta:
        ordering = ["name"]
        default_manager_name = "everywhere"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="one_pool_name_per_cluster")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def taint(self) -> Taint | None:
        if not self.taint_key:
            return None
        return Taint(self.taint_key, self.taint_value, self.taint_effect)

    def spec(self) -> PoolSpec:
        return PoolSpec(self.name, dict(self.labels), self.taint)

    def validate_unique(self, exclude: Collection[str] | None = None) -> None:
        # Names are unique per cluster, and the message says so on the name field (the
        # constraint alone would blame "Cluster and Name" together). A retired pool keeps its
        # name (its moves and audit events refer to it): say so, rather than "already
        # exists" about a pool nobody sees.
        if not (exclude and "name" in exclude):
            taken = (
                Pool.objects.filter(cluster=self.cluster, name=self.name)
                .exclude(pk=self.pk)
                .first()
            )
            if taken is not None and taken.retired_at is not None:
                raise ValidationError(
                    {
                        "name": f"The name {self.name!r} is taken by the retired pool "
                        f"{taken.display_name!r} (retired {taken.retired_at:%Y-%m-%d}): "
                        "restore it, or choose another name."
                    },
                    code="retired_name",
                )
            if taken is not None:
                raise ValidationError(
                    {
                        "name": f"A pool named {self.name!r} already exists in cluster "
                        f"{self.cluster}."
                    },
                    code="unique",
                )
        super().validate_unique(exclude=exclude)

    def clean(self) -> None:
        errors = definition_errors(
            self,
            Pool.objects.active().filter(cluster=self.cluster).exclude(pk=self.pk),
            pool_key=pool_label_key(),
        )
        if errors:
            raise ValidationError(errors)


class NodeQuerySet(models.QuerySet["Node"]):
    def present(self) -> NodeQuerySet:
        return self.filter(gone_at__isnull=True)


class Node(models.Model):
    """The last snapshot of a GPU node, as the inventory sync saw it."""

    # Node names are unique in a cluster only (two clusters may each have a gpu-node-001).
    cluster = models.CharField(max_length=63, default=current_cluster)
    name = models.CharField(max_length=253)
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="nodes"
    )
    pool_label = models.CharField(
        max_length=63, blank=True, help_text="The pool key's raw value ('' when unassigned)."
    )
    gpu_model = models.CharField(max_length=100, blank=True)
    gpu_count = models.PositiveIntegerField(default=0)  # physical GPUs
    gpu_memory_mib = models.PositiveIntegerField(default=0)
    # The scheduler's nvidia.com/gpu: a whole GPU, or a MIG instance or a shared replica
    # where the device plugin advertises those under this name (see `devices`).
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
    # Numeric twins of the allocatable strings and the sums requested by the pods bound to
    # the node (all pods, not only GPU pods: a CPU-only pod still takes CPU a GPU job needs),
    # so the fit check and the figures compare numbers without parsing quantities per read.
    cpu_allocatable_milli = models.BigIntegerField(default=0)
    memory_allocatable_bytes = models.BigIntegerField(default=0)
    cpu_requested_milli = models.BigIntegerField(default=0)
    memory_requested_bytes = models.BigIntegerField(default=0)
    # Capacity, against which allocatable shows what the kubelet reserves for the system
    # daemons, and the pod slots the scheduler counts; 0 when the node does not say (or
    # the row predates them).
    cpu_capacity_milli = models.BigIntegerField(default=0)
    memory_capacity_bytes = models.BigIntegerField(default=0)
    pods_allocatable = models.PositiveIntegerField(default=0)
    # Every other allocatable resource (MIG profiles, shared GPUs, ephemeral storage, ...)
    # and what the node's pods request of each, by name in whole units: the fit check
    # counts every resource a pod asks for, as the scheduler does.
    resources = models.JSONField(default=dict, blank=True)
    resources_requested = models.JSONField(default=dict, blank=True)
    # The physical GPUs and the units by kind (pools.core.devices.devices_record); empty for
    # a node of whole GPUs only, which the gpu_* columns describe.
    devices = models.JSONField(default=dict, blank=True)
    # The DRA devices its ResourceSlices publish, by kind: [driver, type, profile, devices,
    # held by a claim] (pools.core.dra.inventory.node_units); written by pools.inventory.dra.
    dra_units = models.JSONField(default=list, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    last_seen = models.DateTimeField()
    gone_at = models.DateTimeField(null=True, blank=True)

    everywhere = NodeQuerySet.as_manager()
    objects = in_cluster("cluster", NodeQuerySet)

    class Meta:
        ordering = ["name"]
        default_manager_name = "everywhere"
        indexes = [models.Index(fields=["pool", "name"]), models.Index(fields=["gone_at"])]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="one_node_name_per_cluster")
        ]

    def __str__(self) -> str:
        return self.name

    def taint_objects(self) -> list[Taint]:
        return [Taint.from_api(t) for t in self.taints]

    def device_set(self) -> NodeDevices:
        """Its physical GPUs and its units by kind, with what its pods hold of each."""
        return devices_of_row({column: getattr(self, column) for column in DEVICE_COLUMNS})


class PoolStay(models.Model):
    """One node's stay in one pool, from when the inventory saw it there until it saw it
    elsewhere or gone: the figures over a window count each node in the pool it was in at
    each moment, so a move made today does not rewrite last month.

    A row is written only when a node's pool changes (or it comes or goes), never per sync.
    `earliest` marks a node's first stay: nothing says where it was before, so the figures
    take it to reach back before `since`, and the pages say so."""

    class Source(models.TextChoices):
        OBSERVED = "observed", "seen by the inventory"
        MOVES = "moves", "rebuilt from the moves' records"

    node_name = models.CharField(max_length=253)
    cluster = models.CharField(max_length=63, default=current_cluster)
    pool_label = models.CharField(max_length=63, blank=True)  # '' : no pool
    since = models.DateTimeField()
    until = models.DateTimeField(null=True, blank=True)
    earliest = models.BooleanField(default=False)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.OBSERVED)

    everywhere = models.Manager()
    objects = in_cluster("cluster")

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["node_name", "since"]
        indexes = [
            models.Index(fields=["node_name", "until"]),
            models.Index(fields=["until"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "node_name"],
                condition=models.Q(until__isnull=True),
                name="one_open_stay_per_node",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node_name} in {self.pool_label or '(no pool)'} from {self.since}"


class GpuPodQuerySet(models.QuerySet["GpuPod"]):
    def live(self) -> GpuPodQuerySet:
        """Pods that still exist and have not ended (Pending or Running)."""
        return self.filter(deleted_at__isnull=True, finished_at__isnull=True)

    def pending(self) -> GpuPodQuerySet:
        return self.live().filter(phase=GpuPod.Phase.PENDING)


class GpuPod(models.Model):
    """One GPU pod as the inventory saw it, kept after it ends (for POD_HISTORY_DAYS) so the
    pool insights can measure queue times, run times and failure reasons.

    ``pool_label`` is the pool key's value on the pod's node when the pod was bound, so a
    later move of the node does not rewrite where the pod ran."""

    class Phase(models.TextChoices):
        PENDING = "Pending"
        RUNNING = "Running"
        SUCCEEDED = "Succeeded"
        FAILED = "Failed"
        UNKNOWN = "Unknown"

    uid = models.CharField(max_length=64, unique=True)
    cluster = models.CharField(max_length=63, default=current_cluster)
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    node_name = models.CharField(max_length=253, blank=True)
    pool_label = models.CharField(max_length=63, blank=True)
    phase = models.CharField(max_length=16, choices=Phase.choices, default=Phase.PENDING)
    gpus = models.PositiveIntegerField(default=0)  # whole GPUs: nvidia.com/gpu
    # Every GPU unit it asks for (whole GPUs, MIG instances, shared GPUs), and those other
    # than nvidia.com/gpu by resource name ({"nvidia.com/mig-1g.10gb": 2}).
    units = models.PositiveIntegerField(default=0)
    unit_requests = models.JSONField(default=dict, blank=True)
    labels = models.JSONField(default=dict, blank=True)  # the pod's: budgets select on them
    contact = models.CharField(max_length=253, blank=True)  # RECLAIM_CONTACT_ANNOTATION
    reclaim_opt_out = models.BooleanField(default=False)  # RECLAIM_OPT_OUT_ANNOTATION: never
    cpu_milli = models.BigIntegerField(default=0)
    memory_bytes = models.BigIntegerField(default=0)
    owner_kind = models.CharField(max_length=63, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    workload_type = models.CharField(max_length=63, blank=True)
    team = models.CharField(max_length=63, blank=True)
    priority_class = models.CharField(max_length=253, blank=True)
    priority = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField()
    scheduled_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    terminating_since = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    termination_reason = models.CharField(max_length=128, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    termination_message = models.TextField(blank=True)
    unschedulable_message = models.TextField(blank=True)
    waiting_reason = models.CharField(max_length=128, blank=True)
    restarts = models.PositiveIntegerField(default=0)
    # The scheduling block as submitted, for the fit check's verdicts and fixes.
    node_selector = models.JSONField(default=dict, blank=True)
    affinity = models.JSONField(default=dict, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    everywhere = GpuPodQuerySet.as_manager()
    objects = in_cluster("cluster", GpuPodQuerySet)

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["namespace", "name"]
        indexes = [
            models.Index(fields=["node_name"]),
            models.Index(fields=["phase", "deleted_at"]),
            models.Index(fields=["pool_label", "finished_at"]),
            models.Index(fields=["created_at"]),
            models.Index(fields=["namespace", "name"]),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def asks(self) -> str:
        """Its GPU units as the pages say them: "2 GPUs", "1 MIG 1g.10gb"."""
        return units_asked(self.gpus, self.unit_requests or {})


class MoveRequest(models.Model):
    """Nodes to move to a destination pool: asked by one person, approved by others, applied
    by a Celery worker. Every transition is a guarded update in pools/moves/."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        EXECUTING = "executing"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        PARTIALLY_FAILED = "partially_failed", "partially failed"
        REJECTED = "rejected"
        CANCELLED = "cancelled"
        EXPIRED = "expired"

    class Kind(models.TextChoices):
        MOVE = "move"
        RECONCILE = "reconcile"
        LOAN_RETURN = "loan_return", "loan return"
        # A node's MIG layout changed through the workflow (nvidia.com/mig.config), in the
        # pool it is in: drained, cordoned, relabelled, uncordoned once the MIG manager
        # says it succeeded.
        RECONFIGURE = "reconfigure"

    class DrainPolicy(models.TextChoices):
        LEAVE_RUNNING = "leave-running", "leave running pods where they are"
        DRAIN_FIRST = "drain-first", "drain GPU pods first"

    ACTIVE_STATES = (State.PENDING, State.APPROVED, State.EXECUTING)

    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.MOVE)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="move_requests",
    )
    destination = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="incoming")
    reason = models.TextField(max_length=FREE_TEXT_MAX_LENGTH)
    drain_policy = models.CharField(
        max_length=20, choices=DrainPolicy.choices, default=DrainPolicy.LEAVE_RUNNING
    )
    drain_deadline_seconds = models.PositiveIntegerField(default=1800)
    mig_config = models.CharField(
        max_length=63, blank=True, help_text="The MIG configuration a reconfigure asks for."
    )
    plugin_config = models.CharField(
        max_length=63,
        blank=True,
        help_text="The device plugin configuration (GPU sharing) a reconfigure asks for.",
    )
    loan_until = models.DateTimeField(null=True, blank=True)
    # When the loan's return moves were created (they point back here as their parent):
    # the return is requested, not done; each return move records its own progress.
    loan_return_requested_at = models.DateTimeField(null=True, blank=True)
    # The loan end its owner was told about ("ends within the hour"); an extended loan has a
    # new end, and its owner is told again.
    loan_end_notified_for = models.DateTimeField(null=True, blank=True)
    # The return's progress after it was requested (pools/moves/loans.py): the rounds
    # made, when every lent node was back, and while some are not (another move held them,
    # or their return failed): since when, which and why, and when the next round is due.
    loan_return_attempts = models.PositiveSmallIntegerField(default=0)
    loan_returned_at = models.DateTimeField(null=True, blank=True)
    loan_return_stuck_since = models.DateTimeField(null=True, blank=True)
    loan_return_left = models.JSONField(default=list, blank=True)  # [{"node": …, "why": …}]
    loan_return_retry_at = models.DateTimeField(null=True, blank=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    health_override = models.TextField(blank=True, max_length=FREE_TEXT_MAX_LENGTH)
    approvals_required = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    everywhere = models.Manager()
    objects = in_cluster("destination__cluster")

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "created_at"])]

    def __str__(self) -> str:
        return f"move #{self.pk} to {self.destination.name}"


class MoveItem(models.Model):
    """One node of a move: what it was, what was planned, and what happened."""

    class State(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"  # patched
        UNCHANGED = "unchanged"  # already as the destination wants it: no PATCH sent
        FAILED = "failed"

    FINISHED = (State.DONE, State.UNCHANGED, State.FAILED)

    request = models.ForeignKey(MoveRequest, on_delete=models.CASCADE, related_name="items")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="move_items")
    source_pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="outgoing"
    )
    source_label = models.CharField(max_length=63, blank=True)
    planned_diff = models.JSONField(default=dict)
    # The node's labels and taints as the plan saw them (the inventory's row at the request).
    planned_before = models.JSONField(default=dict, blank=True)
    # What the move was approved to make the node carry (pools.core.desired.Target.as_dict):
    # execution applies exactly this, whatever the pool definitions say by then.
    desired = models.JSONField(default=dict, blank=True)
    gpu_pods = models.JSONField(default=list)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    # True while the request may still change the node: at most one such item per node.
    active = models.BooleanField(default=True)
    applied_diff = models.JSONField(default=dict, blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # While the Kubernetes API is unavailable: what the node waits for, shown on the move page.
    waiting = models.CharField(max_length=500, blank=True)
    # Drain-first: the portal cordoned the node (it was schedulable before), so only then is
    # it uncordoned at the end; kept in the row so a resumed item knows it too.
    cordoned_by_portal = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    everywhere = models.Manager()
    objects = in_cluster("request__destination__cluster")

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["node__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["node"], condition=models.Q(active=True), name="one_active_move_per_node"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node.name} in move #{self.request_id}"

    @staticmethod
    def approved(node: Node, target: Target) -> dict[str, Any]:
        """The fields that fix what a move item is approved to do: the node as planned
        (its inventory row), and the target it is to meet."""
        return {
            "planned_before": {
                "labels": node.labels,
                "taints": node.taints,
                "unschedulable": node.cordoned,
            },
            "desired": target.as_dict(),
        }


class Approval(models.Model):
    request = models.ForeignKey(MoveRequest, on_delete=models.CASCADE, related_name="approvals")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approvals"
    )
    comment = models.TextField(blank=True, max_length=FREE_TEXT_MAX_LENGTH)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["request", "approver"], name="one_approval_per_person")
        ]

    def __str__(self) -> str:
        return f"approval of move #{self.request_id} by {self.approver_id}"


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def update(self, **kwargs: Any) -> int:
        raise TypeError("audit events are append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise TypeError("audit events are append-only")


class AuditEvent(models.Model):
    """Who did what, when, and for node changes the labels and taints before and after.
    Append-only: the model refuses updates and deletes."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="audit_events",
    )
    actor_name = models.CharField(max_length=150)  # "system" for the worker and beat
    action = models.CharField(max_length=40, db_index=True)
    cluster = models.CharField(max_length=63, default=current_cluster, db_index=True)
    request = models.ForeignKey(
        MoveRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    maintenance = models.ForeignKey(
        "Maintenance", null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    booking = models.ForeignKey(
        "Booking", null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    reclaim = models.ForeignKey(
        "Reclaim", null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    node_name = models.CharField(max_length=253, blank=True, db_index=True)
    message = models.TextField(blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise TypeError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise TypeError("audit events are append-only")


class AdviceDismissal(models.Model):
    """A suggestion of the advisor someone dismissed, with why, on which evidence: it stays
    hidden while the evidence (its fingerprint) is the same, and comes back when it changes."""

    # Each cluster has its own advisor: two clusters' pools may share names, and a
    # suggestion dismissed in one is not dismissed in the other.
    cluster = models.CharField(max_length=63, default=current_cluster)
    # Rule and pools concerned; a pool of another cluster as cluster/pool.
    key = models.CharField(max_length=300)
    fingerprint = models.CharField(max_length=64)
    reason = models.TextField()
    dismissed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="advice_dismissals"
    )
    dismissed_at = models.DateTimeField(auto_now=True)

    everywhere = models.Manager()
    objects = in_cluster("cluster")

    class Meta:
        ordering = ["-dismissed_at"]
        default_manager_name = "everywhere"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "key"], name="one_dismissal_per_key")
        ]

    def __str__(self) -> str:
        return f"{self.key} dismissed"


class Drill(models.Model):
    """A failure rehearsal on one pool, with a defined end: a change to the cluster for
    `hold_seconds` (a node cordoned, a GPU fault injected, a new node added), what the portal
    and the pool did meanwhile, and the cluster restored. Started by a pool admin; every step
    is audited."""

    class Kind(models.TextChoices):
        NODE_DOWN = "node_down", "node down (cordon)"
        GPU_FAULT = "gpu_fault", "GPU fault (injected XID)"
        NODE_JOINS = "node_joins", "a new node joins"
        NO_ROOM = "no_room", "lack of resources"
        JOB_TIMEOUT = "job_timeout", "job timeout"

    class State(models.TextChoices):
        STARTING = "starting"
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"  # a check did not pass: what the drill is for
        ERRORED = "errored"  # the drill could not run (the API server refused, ...)

    ACTIVE_STATES = (State.STARTING, State.RUNNING)

    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="drills")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.NODE_DOWN)
    node_name = models.CharField(max_length=253)
    state = models.CharField(max_length=20, choices=State.choices, default=State.STARTING)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="drills"
    )
    hold_seconds = models.PositiveIntegerField(default=60)
    started_at = models.DateTimeField(auto_now_add=True)
    ends_at = models.DateTimeField(help_text="The drill's end: the node is restored by then.")
    finished_at = models.DateTimeField(null=True, blank=True)
    observed = models.JSONField(default=dict, blank=True)
    checks = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    everywhere = models.Manager()
    objects = in_cluster("pool__cluster")

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pool"],
                condition=models.Q(state__in=["starting", "running"]),
                name="one_active_drill_per_pool",
            )
        ]

    def __str__(self) -> str:
        return f"drill #{self.pk} on {self.pool.name}"


class Maintenance(models.Model):
    """A driver or firmware upgrade taken through some nodes of a pool in waves: each wave
    (at most `wave_size` nodes, or that per cent of them) is cordoned and drained within the
    pool's headroom, held until an operator confirms the step or a node label says it is
    done, then uncordoned. The worker advances it a step at a time (pools.maintenance.waves);
    the database says where it stands, so a worker that dies loses nothing."""

    class State(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        DONE = "done"
        CANCELLED = "cancelled"

    class Hold(models.TextChoices):
        CONFIRM = "confirm", "until an operator confirms the step"
        LABEL = "label", "until a node label says so"

    ACTIVE_STATES = (State.RUNNING, State.PAUSED)

    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="maintenances")
    reason = models.TextField(max_length=FREE_TEXT_MAX_LENGTH)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="maintenances"
    )
    state = models.CharField(max_length=20, choices=State.choices, default=State.RUNNING)
    wave_size = models.PositiveSmallIntegerField()
    wave_percent = models.BooleanField(default=False)
    hold = models.CharField(max_length=10, choices=Hold.choices, default=Hold.CONFIRM)
    hold_label = models.CharField(max_length=400, blank=True)  # "key" or "key=value"
    step = models.CharField(max_length=200, blank=True)  # what the operator confirms
    drain_deadline_seconds = models.PositiveIntegerField(default=1800)
    wave = models.PositiveSmallIntegerField(default=0)  # the wave under way; 0 before the first
    wave_started_at = models.DateTimeField(null=True, blank=True)
    confirmed_wave = models.PositiveSmallIntegerField(default=0)
    waiting = models.CharField(max_length=1000, blank=True)  # why it does not go on now
    paused_reason = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)  # the worker winds it down
    lease_until = models.DateTimeField(null=True, blank=True)  # a worker advancing it
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    everywhere = models.Manager()
    objects = in_cluster("pool__cluster")

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pool"],
                condition=models.Q(state__in=["running", "paused"]),
                name="one_active_maintenance_per_pool",
            )
        ]

    def __str__(self) -> str:
        return f"maintenance #{self.pk} of {self.pool.name}"


class MaintenanceNode(models.Model):
    """One node of a maintenance: its wave, where it stands, and whether the cordon on it is
    the maintenance's (an operator's own cordon is left alone)."""

    class State(models.TextChoices):
        WAITING = "waiting"  # its wave has not come
        DRAINING = "draining"  # cordoned, its GPU pods being evicted
        HELD = "held"  # drained: the upgrade's turn
        DONE = "done"  # uncordoned
        LEFT = "left"  # the maintenance ended before its wave (cancelled, or the node gone)

    UNFINISHED = (State.WAITING, State.DRAINING, State.HELD)

    maintenance = models.ForeignKey(Maintenance, on_delete=models.CASCADE, related_name="nodes")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="maintenance_items")
    wave = models.PositiveSmallIntegerField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.WAITING)
    cordoned_by_portal = models.BooleanField(default=False)
    operator_cordon = models.BooleanField(default=False)  # cordoned before its wave: theirs
    label_before = models.JSONField(null=True, blank=True)  # the value at the drain; None: absent
    refusals = models.JSONField(default=dict, blank=True)  # pod -> the budget's last words
    drained_at = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)

    everywhere = models.Manager()
    objects = in_cluster("maintenance__pool__cluster")

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["maintenance", "wave", "node__name"]
        constraints = [
            models.UniqueConstraint(fields=["maintenance", "node"], name="one_row_per_node")
        ]

    def __str__(self) -> str:
        return f"{self.node.name} in maintenance #{self.maintenance_id}"


class Booking(models.Model):
    """Nodes of a pool booked for a team over a window in the future: named nodes, or a number
    of GPUs of a model (whole nodes chosen at the start). Approved with four eyes; at its start
    it becomes a loan (an approved move with `loan_until` at its end) that the normal execution
    applies and the loans' return brings back (pools.bookings)."""

    class State(models.TextChoices):
        PENDING = "pending"  # asked, waiting for its approvals
        APPROVED = "approved"  # its window is held; it starts at starts_at
        STARTED = "started"  # became its loan
        ENDED = "ended"  # its loan came back
        MISSED = "missed"  # its window passed without its nodes free to start
        REJECTED = "rejected"
        CANCELLED = "cancelled"
        EXPIRED = "expired"  # not approved before its start

    HOLDING_STATES = (State.APPROVED, State.STARTED)  # what holds the window
    OPEN_STATES = (State.PENDING, State.APPROVED, State.STARTED)

    source = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="bookings_out")
    destination = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="bookings_in")
    team = models.CharField(max_length=63, blank=True)
    node_names = models.JSONField(default=list, blank=True)  # named nodes
    gpu_model = models.CharField(max_length=100, blank=True)  # or a count of GPUs of a model
    gpus = models.PositiveIntegerField(default=0)
    taken = models.JSONField(default=list, blank=True)  # the nodes its loan took
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    reason = models.TextField(max_length=FREE_TEXT_MAX_LENGTH)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="bookings"
    )
    approvals_required = models.PositiveSmallIntegerField(default=1)
    loan = models.OneToOneField(
        MoveRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="booking"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    start_delay_seconds = models.PositiveIntegerField(null=True, blank=True)
    start_blocked = models.TextField(blank=True)  # why its nodes are not free at the start
    told_day_ahead = models.BooleanField(default=False)
    told_hour_ahead = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    everywhere = models.Manager()
    objects = in_cluster("destination__cluster")

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["starts_at", "id"]
        indexes = [models.Index(fields=["state", "starts_at"])]

    def __str__(self) -> str:
        return f"booking #{self.pk} of {self.source.name}"

    @property
    def what(self) -> str:
        if self.gpus:
            return f"{self.gpus} {self.gpu_model} GPU{'' if self.gpus == 1 else 's'}"
        count = len(self.node_names)
        return f"{count} node{'' if count == 1 else 's'}"


class BookingApproval(models.Model):
    booking = models.ForeignKey(Booking, on_delete=models.CASCADE, related_name="approvals")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="booking_approvals"
    )
    comment = models.TextField(blank=True, max_length=FREE_TEXT_MAX_LENGTH)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["booking", "approver"], name="one_approval_per_booker")
        ]

    def __str__(self) -> str:
        return f"approval of booking #{self.booking_id}"


class CalendarFeed(models.Model):
    """A read-only key for one pool's iCalendar feed, for a calendar application that can
    only fetch a URL: it reads that feed and nothing else; stored as a SHA-256 hash, shown
    once, revocable."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calendar_feeds"
    )
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="calendar_feeds")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"calendar feed of {self.pool_id} for {self.user_id}"


class ReclaimPolicy(models.Model):
    """When a pool's idle GPUs are worth getting back: a pod that holds GPUs and stays under
    `below_percent` utilisation for `for_hours` is a reclaim candidate; its owner is given
    `grace_hours` to answer. Off unless enabled (pools.reclaim)."""

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, related_name="reclaim_policy")
    enabled = models.BooleanField(default=False)
    below_percent = models.FloatField(default=5.0)
    for_hours = models.PositiveSmallIntegerField(default=4)
    grace_hours = models.PositiveSmallIntegerField(default=24)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    everywhere = models.Manager()
    objects = in_cluster("pool__cluster")

    class Meta:
        default_manager_name = "everywhere"

    def __str__(self) -> str:
        return f"reclaim policy of {self.pool_id}"


class Reclaim(models.Model):
    """Getting one idle pod's GPUs back, under its pool's reclaim policy (pools.reclaim): its
    owner is told and given the policy's grace; after it, a prefilled request that one person
    files and another approves evicts the pod through the eviction API, so its disruption
    budget is kept. Open (tracked by the sweep) while `finished_at` is null: at most one per
    pod."""

    class State(models.TextChoices):
        NOTICED = "noticed"  # its owner told; the grace runs
        DUE = "due"  # the grace is over: a prefilled request waits to be filed
        REQUESTED = "requested"  # filed; waits for someone else's approval
        APPROVED = "approved"  # being evicted (a refusing budget is asked again)
        REJECTED = "rejected"  # kept; noticed again only once it has worked and idled again
        EVICTED = "evicted"
        RECOVERED = "recovered"  # it worked again, or went away, before its eviction
        OPTED_OUT = "opted_out"  # its owner annotated it never to be reclaimed
        FAILED = "failed"  # its budget refused the eviction until the deadline
        CANCELLED = "cancelled"  # the policy turned off, the pool retired, or the pod moved

    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="reclaims")
    namespace = models.CharField(max_length=63)
    pod = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64)  # the pod noticed, not one made again by name
    node_name = models.CharField(max_length=253)
    units = models.PositiveIntegerField()
    team = models.CharField(max_length=63, blank=True)
    contact = models.CharField(max_length=253, blank=True)
    owner = models.CharField(max_length=320, blank=True)  # its gang: "Job ns/name"
    idle_hours = models.FloatField()  # when last seen idle, over the last week
    gpu_hours = models.FloatField()
    state = models.CharField(max_length=20, choices=State.choices, default=State.NOTICED)
    noticed_at = models.DateTimeField()
    grace_until = models.DateTimeField()
    last_seen_idle_at = models.DateTimeField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    requested_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, max_length=FREE_TEXT_MAX_LENGTH)  # the request's
    decision_reason = models.TextField(blank=True, max_length=FREE_TEXT_MAX_LENGTH)
    evict_deadline = models.DateTimeField(null=True, blank=True)
    refused = models.TextField(blank=True)  # the budget's last words, while it refuses
    # An approved reclaim the sweep found must not go on (the pod worked again, opted out,
    # moved; the policy was turned off): the worker, which alone ends approved reclaims, ends
    # it so at its next attempt instead of evicting.
    stop_state = models.CharField(max_length=20, blank=True)
    stop_why = models.TextField(blank=True)
    next_try_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.TextField(blank=True)  # how it ended, in words

    everywhere = models.Manager()
    objects = in_cluster("pool__cluster")

    class Meta:
        default_manager_name = "everywhere"
        ordering = ["-noticed_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pod_uid"],
                condition=models.Q(finished_at__isnull=True),
                name="one_open_reclaim_per_pod",
            )
        ]
        indexes = [models.Index(fields=["pool", "state"])]

    def __str__(self) -> str:
        return f"reclaim #{self.pk} of {self.namespace}/{self.pod}"


class ApiToken(models.Model):
    """A personal API token: shown once, stored as a SHA-256 hash, revocable."""

    PREFIX = "gpp_"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(
        max_length=16, help_text="The token's first characters, to tell tokens apart."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Optional: after this the token is refused (401) as a revoked one is.
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"


class IdempotencyRecord(models.Model):
    """The first answer to a POST sent with an Idempotency-Key, replayed for retries."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)  # method, path and body of the first request
    status = models.PositiveSmallIntegerField(null=True, blank=True)  # None: in progress
    body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="one_answer_per_idempotency_key")
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.status or 'in progress'})"


class InventoryLease(models.Model):
    """Who writes the inventory: one row per lease, held by one process until it expires.

    The watcher holds it for as long as it runs, renewing it; a second watcher waits and
    takes it over once it expires (the first died or hung). The periodic full sync takes it
    for one sync, or, while a watcher holds it, asks the watcher to re-list instead. Each
    cluster has its own (pools.inventory.lease.lease_name)."""

    name = models.CharField(max_length=127, unique=True)
    holder = models.CharField(max_length=255, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)
    renewed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()
    relist_requested_at = models.DateTimeField(null=True, blank=True)
    # When the writer last had an answer from the API server (a list, a watch event or
    # bookmark, a stream the server ended), and, while it has none, why: a writer renewing
    # its lease is alive, yet its rows are only as fresh as its last answer.
    heard_at = models.DateTimeField(null=True, blank=True)
    trouble = models.CharField(max_length=500, blank=True)

    def __str__(self) -> str:
        return f"{self.name}: {self.holder or 'free'}"


class InventoryVersion(models.Model):
    """A counter every write of `Node` rows raises in the writer's own transaction: figures
    derived from the rows (the overview's per-pool figures) are cached under it, so a
    change is never answered from figures computed before it."""

    name = models.CharField(max_length=63, unique=True)
    version = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}: {self.version}"


class DraSnapshot(models.Model):
    """What the cluster holds for Dynamic Resource Allocation, as last listed: one row.

    The fit check reads it from the database, as it reads nodes (the web pods have no API
    access). The objects are kept as the API serves them, trimmed to what the allocator
    reads: ResourceSlices' spec, DeviceClasses' selectors, ResourceClaims' spec and
    allocation, ResourceClaimTemplates' spec. One row per cluster (pools.inventory.dra)."""

    name = models.CharField(max_length=127, unique=True, default="cluster")
    served = models.BooleanField(default=False)  # the API server serves resource.k8s.io/v1
    slices = models.JSONField(default=list)
    classes = models.JSONField(default=list)
    claims = models.JSONField(default=list)
    templates = models.JSONField(default=list)
    unit_nodes = models.JSONField(default=list)  # the nodes whose dra_units were last written
    listed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"DRA: {len(self.slices)} slices, {len(self.claims)} claims"
