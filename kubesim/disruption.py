"""PodDisruptionBudgets: the disruption controller's status, and the eviction subresource.

Both follow the real code. The controller (pkg/controller/disruption) keeps each budget's
status current: `currentHealthy` counts matching pods whose Ready condition is True (not
the phase), that are not being deleted and not just approved for eviction
(`disruptedPods`, for two minutes); `desiredHealthy` comes from `minAvailable` (an integer:
over the pods found; a percentage, rounded up: over the controllers' scale) or
`maxUnavailable`; a pod owned by a Job makes a percentage or `maxUnavailable` unusable
("jobs.batch does not implement the scale subresource"), which fails the budget safe.

The eviction handler (pkg/registry/core/pod/storage/eviction.go) ignores budgets for pods
not Running or already terminating, answers 500 for a pod covered by two budgets, 429 for
a budget whose status is older than its spec (retry after 10 s) or that allows no
disruption, lets an unready pod go when the budget is otherwise healthy, and records each
approved eviction in the budget's status before deleting the pod gracefully.

kubesim runs no ReplicaSet or Deployment controllers, so an evicted pod is not replaced; a
controller's scale is the most pods it has owned at once (there is no scaling in kubesim,
so that is the replicas a real controller keeps, and replaces evicted pods up to). The
expected count does not drop after an eviction, and the budget allows no second one
until the missing pod is back, as on a real cluster.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Protocol

from kubesim import errors
from kubesim.clock import parse_rfc3339
from kubesim.cluster_view import ClusterView
from kubesim.errors import ApiError
from kubesim.selectors import SelectorError, selector_from_object, selector_is_empty
from kubesim.store import Entry, key_of
from kubesim.termination import DeleteOptions, Termination, check_before_delete

DELETION_TIMEOUT = 120.0  # seconds an approved eviction holds a pod out of currentHealthy
MAX_DISRUPTED_PODS = 2000
PDB = "poddisruptionbudgets"


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("controller"):
            return dict(owner)
    return None


def scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    text = str(value)
    if isinstance(value, str) and text.endswith("%"):
        return math.ceil(int(text[:-1]) * total / 100)
    return int(value)


class EvictingCluster(ClusterView, Protocol):
    """The cluster as the eviction API uses it: an eviction ends in a graceful delete."""

    termination: Termination


class Disruption:
    def __init__(self, cluster: EvictingCluster) -> None:
        self.cluster = cluster
        self.dirty: set[str] = set()
        self.by_namespace: dict[str, set[str]] = {}
        self.paused = False  # a stalled controller, so a test can see a stale status
        self._rechecks: dict[str, float] = {}
        # Per controller uid: the pods it owns now, and the most it has owned (its scale).
        self._owned_now: dict[str, int] = {}
        self._scales: dict[str, int] = {}

    @property
    def store(self):  # type: ignore[no-untyped-def]
        return self.cluster.store

    # --- the controller ---
    def note(self, resource: str, type_: str, new: Entry, old: Entry | None) -> None:
        """A store listener: which budgets a write may have changed."""
        meta = new.obj["metadata"]
        namespace = meta.get("namespace") or ""
        if resource == "pods" and (old is None or type_ == "DELETED"):
            self._count_owned(new.obj, -1 if type_ == "DELETED" else 1)
        if resource == PDB:
            key = key_of(namespace, meta["name"])
            names = self.by_namespace.setdefault(namespace, set())
            if type_ == "DELETED":
                names.discard(key)
                return
            names.add(key)
            # A status write (this controller's, or an eviction's) needs no resync of its
            # own: the pod writes around it mark the budget.
            if old is None or old.obj.get("spec") != new.obj.get("spec"):
                self.dirty.add(key)
        elif resource == "pods" and self.by_namespace.get(namespace):
            labels = [new.obj["metadata"].get("labels") or {}]
            if old is not None:
                labels.append(old.obj["metadata"].get("labels") or {})
            for key in self.by_namespace[namespace]:
                if self._selects(key, labels):
                    self.dirty.add(key)

    def _selects(self, key: str, labels: list[dict[str, str]]) -> bool:
        """Whether budget `key` selects a pod with any of these labels (an invalid selector
        counts as yes: the sync reports it)."""
        found = self.store.objects[PDB].get(key)
        if found is None:
            return False
        selector = (found.obj.get("spec") or {}).get("selector")
        try:
            check = selector_from_object(selector)
        except SelectorError:
            return True
        return check is not None and any(check(ls) for ls in labels)

    def sync(self) -> bool:
        if self.paused or not self.dirty:
            return False
        pending, self.dirty = self.dirty, set()
        changed = False
        for key in sorted(pending):
            found = self.store.objects[PDB].get(key)
            if found is not None:
                changed |= self._sync_one(found)
        return changed

    def _pods_for(self, pdb: dict[str, Any]) -> list[dict[str, Any]]:
        check = selector_from_object((pdb.get("spec") or {}).get("selector"))
        if check is None:
            return []
        namespace = pdb["metadata"].get("namespace")
        return [
            e.obj
            for e in self.cluster.pods_in(namespace)
            if check(e.obj["metadata"].get("labels") or {})
        ]

    def _expected(self, pdb: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[int, int]:
        """(expectedCount, desiredHealthy), as getExpectedPodCount."""
        spec = pdb.get("spec") or {}
        if spec.get("maxUnavailable") is not None:
            expected = self._scale(pods)
            return expected, max(0, expected - scaled(spec["maxUnavailable"], expected))
        minimum = spec.get("minAvailable")
        if minimum is None:
            return 0, 0
        if isinstance(minimum, int):
            return len(pods), minimum
        expected = self._scale(pods)
        return expected, scaled(minimum, expected)

    def _scale(self, pods: list[dict[str, Any]]) -> int:
        scales: dict[str, int] = {}
        for pod in pods:
            owner = controller_of(pod)
            if owner is None:
                continue  # unmanaged: the real controller records an event and goes on
            if owner.get("kind") == "Job" and str(owner.get("apiVersion", "")).startswith("batch/"):
                raise ValueError("jobs.batch does not implement the scale subresource")
            uid = str(owner.get("uid"))
            if uid not in scales:
                scales[uid] = self._owned(pod["metadata"].get("namespace"), uid)
        return sum(scales.values())

    def _owned(self, namespace: str | None, uid: str) -> int:
        """The controller's scale: the most pods it has owned (after a restart from saved
        state, at least the pods it owns now)."""
        now = sum(
            1
            for e in self.cluster.pods_in(namespace)
            if (controller_of(e.obj) or {}).get("uid") == uid
        )
        return max(now, self._scales.get(uid, 0))

    def _count_owned(self, pod: dict[str, Any], change: int) -> None:
        owner = controller_of(pod)
        if owner is None:
            return
        uid = str(owner.get("uid"))
        owned = self._owned_now[uid] = self._owned_now.get(uid, 0) + change
        if owned > self._scales.get(uid, 0):
            self._scales[uid] = owned

    def _sync_one(self, found: Entry) -> bool:
        pdb = found.obj
        now = self.store.clock.now()
        try:
            pods = self._pods_for(pdb)
            expected, desired = self._expected(pdb, pods)
        except (SelectorError, ValueError) as exc:
            return self._fail_safe(found, str(exc))
        disrupted, recheck = self._disrupted(pdb, pods, now)
        healthy = sum(
            1
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"] not in disrupted
            and pod_ready(p)
        )
        allowed = healthy - desired if expected > 0 else 0
        status: dict[str, Any] = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "disruptionsAllowed": max(0, allowed),
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        status["conditions"] = self._conditions(pdb, status)
        if recheck is not None:
            self._recheck_at(
                key_of(pdb["metadata"].get("namespace"), pdb["metadata"]["name"]), recheck
            )
        return self._write_status(found, status)

    def _recheck_at(self, key: str, when: float) -> None:
        if self._rechecks.get(key, float("inf")) <= when:
            return
        self._rechecks[key] = when

        def recheck() -> None:
            if self._rechecks.get(key) == when:
                del self._rechecks[key]
            self.dirty.add(key)

        self.cluster.timers.at(when, recheck)

    def _disrupted(
        self, pdb: dict[str, Any], pods: list[dict[str, Any]], now: float
    ) -> tuple[dict[str, str], float | None]:
        """buildDisruptedPodMap: approved evictions not yet seen through, until they expire."""
        listed = (pdb.get("status") or {}).get("disruptedPods") or {}
        kept: dict[str, str] = {}
        recheck: float | None = None
        for pod in pods:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp") or name not in listed:
                continue
            expires = parse_rfc3339(listed[name]) + DELETION_TIMEOUT
            if expires < now:
                continue
            kept[name] = listed[name]
            recheck = expires if recheck is None else min(recheck, expires)
        return kept, recheck

    def _conditions(self, pdb: dict[str, Any], status: dict[str, Any]) -> list[dict[str, Any]]:
        if status["disruptionsAllowed"] > 0:
            wanted = ("True", "SufficientPods", "")
        else:
            wanted = ("False", "InsufficientPods", "")
        return self._set_condition(pdb, status["observedGeneration"], *wanted)

    def _set_condition(
        self, pdb: dict[str, Any], generation: int, state: str, reason: str, message: str
    ) -> list[dict[str, Any]]:
        """apimeta.SetStatusCondition for the DisruptionAllowed condition."""
        conditions = copy.deepcopy((pdb.get("status") or {}).get("conditions") or [])
        current = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
        if current is None:
            current = {"type": "DisruptionAllowed"}
            conditions.append(current)
        if current.get("status") != state:
            current["lastTransitionTime"] = self.store.clock.rfc3339()
        current.update({"status": state, "observedGeneration": generation, "reason": reason})
        current["message"] = message
        return conditions

    def _fail_safe(self, found: Entry, message: str) -> bool:
        pdb = found.obj
        status = dict(pdb.get("status") or {})
        status["disruptionsAllowed"] = 0
        generation = status.get("observedGeneration", 0)
        status["conditions"] = self._set_condition(pdb, generation, "False", "SyncFailed", message)
        return self._write_status(found, status)

    def _write_status(self, found: Entry, status: dict[str, Any]) -> bool:
        if found.obj.get("status") == status:
            return False
        self.store.replace(PDB, {**found.obj, "status": status}, expected_rv=None)
        return True

    # --- the eviction subresource ---
    def evict(
        self, namespace: str, name: str, eviction: dict[str, Any], dry_run_query: bool
    ) -> None:
        if (eviction.get("metadata") or {}).get("name") != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        options = self._delete_options(eviction, dry_run_query)
        store = self.store
        with store.lock:
            current = store.get("pods", namespace, name)
            pod = current.obj
            if self._can_ignore_budgets(pod):
                enforce = not (
                    pod["metadata"].get("deletionTimestamp")
                    or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                )
                self._delete(current, options, enforce)
                return
            budgets = self._budgets_for(pod)
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "",
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                )
            if budgets:
                budget = budgets[0]
                status = budget.obj.get("status") or {}
                unready_may_go = not pod_ready(pod) and (
                    (budget.obj.get("spec") or {}).get("unhealthyPodEvictionPolicy")
                    == "AlwaysAllow"
                    or (
                        status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0)
                        and status.get("desiredHealthy", 0) > 0
                    )
                )
                if unready_may_go:
                    self._delete(current, options, enforce=True)
                    return
                self._check_and_decrement(budget, name, options.dry_run)
            self._delete(current, options, enforce=False)

    @staticmethod
    def _delete_options(eviction: dict[str, Any], dry_run_query: bool) -> DeleteOptions:
        body = eviction.get("deleteOptions") or {}
        in_body = body.get("dryRun") or []
        query = ["All"] if dry_run_query else []
        if in_body and query and in_body != query:
            raise ApiError(
                500,
                "",
                "Non-matching dry-run options in request and content: "
                f"[{' '.join(query)}] and [{' '.join(in_body)}]",
            )
        return DeleteOptions.parse(body, {}, dry_run=bool(in_body or query))

    @staticmethod
    def _can_ignore_budgets(pod: dict[str, Any]) -> bool:
        phase = (pod.get("status") or {}).get("phase")
        return phase in ("Succeeded", "Failed", "Pending") or bool(
            pod["metadata"].get("deletionTimestamp")
        )

    def _budgets_for(self, pod: dict[str, Any]) -> list[Entry]:
        namespace = pod["metadata"].get("namespace") or ""
        labels = pod["metadata"].get("labels") or {}
        found = []
        for key in sorted(self.by_namespace.get(namespace, ())):
            budget = self.store.objects[PDB].get(key)
            if budget is None:
                continue
            selector = (budget.obj.get("spec") or {}).get("selector")
            try:
                check = selector_from_object(selector)
            except SelectorError:
                continue  # an invalid selector matches no pod
            # A budget with a nil or empty selector matches nothing, not everything.
            if check is None or selector_is_empty(selector) or not check(labels):
                continue
            found.append(budget)
        return found

    def _check_and_decrement(self, budget: Entry, pod_name: str, dry_run: bool) -> None:
        pdb = budget.obj
        name = pdb["metadata"]["name"]
        status = pdb.get("status") or {}
        if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
            raise _too_many_requests(
                f"The disruption budget {name} is still being processed by the server.", 10
            )
        allowed = status.get("disruptionsAllowed", 0)
        if allowed < 0:
            raise _budget_forbidden(name, "pdb disruptions allowed is negative")
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
            raise _budget_forbidden(
                name,
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            )
        if allowed == 0:
            raise _too_many_requests(
                f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy "
                f"pods and has {status.get('currentHealthy', 0)} currently",
                0,
            )
        if dry_run:
            return
        new_status = copy.deepcopy(status)
        new_status["disruptionsAllowed"] = allowed - 1
        if allowed - 1 == 0:
            new_status["conditions"] = self._set_condition(
                pdb, status.get("observedGeneration", 1), "False", "InsufficientPods", ""
            )
        new_status.setdefault("disruptedPods", {})[pod_name] = self.store.clock.rfc3339()
        self.store.replace(PDB, {**pdb, "status": new_status}, expected_rv=None)

    def _delete(self, current: Entry, options: DeleteOptions, enforce: bool) -> None:
        """addConditionAndDeletePod: the DisruptionTarget condition, then a graceful delete."""
        meta = current.obj["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        if options.resource_version is None and enforce:
            options = DeleteOptions(
                options.grace_period, options.uid, meta["resourceVersion"], options.dry_run
            )
        if not options.dry_run:
            check_before_delete("pods", "Pod", current, options.uid, options.resource_version)
            updated = self._with_disruption_condition(current.obj)
            stored = self.store.replace("pods", updated, expected_rv=None)
            if options.resource_version is not None:
                options = DeleteOptions(
                    options.grace_period,
                    options.uid,
                    stored.obj["metadata"]["resourceVersion"],
                    options.dry_run,
                )
        self.cluster.termination.delete("pods", namespace, name, options)

    def _with_disruption_condition(self, pod: dict[str, Any]) -> dict[str, Any]:
        updated = copy.deepcopy(pod)
        status = updated.setdefault("status", {})
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"
        ]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self.store.clock.rfc3339(),
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            }
        )
        status["conditions"] = conditions
        return updated


def _too_many_requests(cause: str, retry_after: int) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
        details,
        headers,
    )


def _budget_forbidden(name: str, reason: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'poddisruptionbudget.policy "{name}" is forbidden: {reason}',
        {"name": name, "group": "policy", "kind": "poddisruptionbudget"},
    )
