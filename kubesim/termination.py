"""Deleting objects as the generic registry does: preconditions, and graceful pod deletion.

A deleted pod is not removed at once. Like the real registry (pod strategy
`CheckGracefulDelete`, generic `BeforeDelete`), it gets `metadata.deletionTimestamp` (now
plus its grace period) and `deletionGracePeriodSeconds`, stays listed, keeps its node and
its GPUs, and is removed when the grace period ends — here by one clock timer, as the
kubelet's final delete would. The grace period is the request's `gracePeriodSeconds`, else
the pod's `spec.terminationGracePeriodSeconds` (30 by default); a pod never scheduled, or
already Succeeded or Failed, goes at once; a second delete may only shorten it.

A simulated workload that stops sooner after SIGTERM says so with the annotation
`kubesim.io/stop-seconds`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.clock import parse_rfc3339
from kubesim.store import Entry, check_preconditions, entry, key_of

if TYPE_CHECKING:
    from kubesim.cluster_view import ClusterView

STOP_ANNOTATION = "kubesim.io/stop-seconds"
DEFAULT_GRACE = 30


@dataclass(frozen=True)
class DeleteOptions:
    grace_period: int | None = None
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, body: Any, query: dict[str, str], dry_run: bool) -> DeleteOptions:
        body = body if isinstance(body, dict) else {}
        grace = body.get("gracePeriodSeconds")
        if grace is None and query.get("gracePeriodSeconds") not in (None, ""):
            try:
                grace = int(query["gracePeriodSeconds"])
            except ValueError:
                raise errors.bad_request(
                    f'strconv.ParseInt: parsing "{query["gracePeriodSeconds"]}": invalid syntax'
                ) from None
        preconditions = body.get("preconditions") or {}
        return cls(
            grace_period=None if grace is None else int(grace),
            uid=preconditions.get("uid"),
            resource_version=preconditions.get("resourceVersion"),
            dry_run=dry_run,
        )


def check_before_delete(
    resource: str, kind: str, current: Entry, uid: str | None, resource_version: str | None
) -> None:
    """A DELETE's preconditions, checked against the object read first and worded as
    rest.BeforeDelete words them (the eviction handler uses the same words); the storage
    layer checks them again as it deletes (store.check_preconditions)."""
    meta = current.obj["metadata"]
    if uid is not None and uid != meta.get("uid"):
        raise errors.conflict_on_kind(
            resource,
            kind,
            meta["name"],
            f"the UID in the precondition ({uid}) does not match the UID in record "
            f"({meta.get('uid')}). The object might have been deleted and then recreated",
        )
    if resource_version is not None and resource_version != meta.get("resourceVersion"):
        raise errors.conflict_on_kind(
            resource,
            kind,
            meta["name"],
            f"the ResourceVersion in the precondition ({resource_version}) does not match the "
            f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have "
            "been modified",
        )


class Termination:
    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster

    @property
    def store(self):  # type: ignore[no-untyped-def]
        return self.cluster.store

    def delete(
        self, resource: str, namespace: str | None, name: str, options: DeleteOptions
    ) -> Entry:
        """Delete, or start deleting; the object as the API server answers the DELETE."""
        store = self.store
        with store.lock:
            current = store.get(resource, namespace, name)
            check_preconditions(resource, current, options.uid, options.resource_version)
            if resource != "pods":
                return self._finish(resource, current, dry_run=options.dry_run)
            pod = current.obj
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                return self._delete_again(current, options)
            period = self.grace_period(pod, options.grace_period)
            if period == 0:
                return self._finish("pods", current, dry_run=options.dry_run)
            now = store.clock.now()
            terminating = copy.deepcopy(pod)
            terminating["metadata"]["deletionTimestamp"] = store.clock.rfc3339(now + period)
            terminating["metadata"]["deletionGracePeriodSeconds"] = period
            if options.dry_run:
                return entry(terminating)
            stored = store.replace("pods", terminating, expected_rv=None)
            self._reap_later(stored, now + self.stop_after(pod, period))
            # The kubelet's Killing event follows the deletionTimestamp (kubesim.events).
            return stored

    @staticmethod
    def grace_period(pod: dict[str, Any], requested: int | None) -> int:
        """The pod strategy's CheckGracefulDelete."""
        spec = pod.get("spec") or {}
        if requested is not None:
            period = requested
        else:
            period = int(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE))
        if not spec.get("nodeName"):
            period = 0
        if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
            period = 0
        return 1 if period < 0 else period

    @staticmethod
    def stop_after(pod: dict[str, Any], period: int) -> float:
        annotations = pod["metadata"].get("annotations") or {}
        try:
            stops = float(annotations[STOP_ANNOTATION])
        except (KeyError, ValueError):
            return float(period)
        return max(0.0, min(stops, float(period)))

    def _finish(self, resource: str, current: Entry, *, dry_run: bool = False) -> Entry:
        """The deletion itself: the object goes now, unless finalizers hold it. A held
        object stays with a deletionTimestamp and deletionGracePeriodSeconds 0 until an
        update removes its last finalizer (`released`)."""
        meta = current.obj["metadata"]
        if not meta.get("finalizers"):
            return self.store.delete(resource, meta.get("namespace"), meta["name"], dry_run=dry_run)
        if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") == 0:
            return current  # held already
        held = copy.deepcopy(current.obj)
        held["metadata"]["deletionTimestamp"] = self.store.clock.rfc3339()
        held["metadata"]["deletionGracePeriodSeconds"] = 0
        if dry_run:
            return entry(held)
        return self.store.replace(resource, held, expected_rv=None)  # type: ignore[no-any-return]

    def released(self, resource: str, old: Entry, new: Entry) -> None:
        """An update that removes the last finalizer of an object being deleted, once its
        grace period is over, deletes it (the registry's shouldDeleteDuringUpdate)."""
        before, after = old.obj["metadata"], new.obj["metadata"]
        if after.get("finalizers") or not before.get("finalizers"):
            return
        if before.get("deletionTimestamp") and not before.get("deletionGracePeriodSeconds"):
            self.store.delete(resource, after.get("namespace"), after["name"])

    def _delete_again(self, current: Entry, options: DeleteOptions) -> Entry:
        """A delete of a terminating pod (BeforeDelete): may only shorten the grace period."""
        meta = current.obj["metadata"]
        period_now = meta.get("deletionGracePeriodSeconds")
        if not period_now:
            return self._finish("pods", current, dry_run=options.dry_run)
        wanted = options.grace_period
        if wanted is None or wanted >= period_now:
            return current  # graceful deletion already under way
        if wanted <= 0:
            return self._finish("pods", current, dry_run=options.dry_run)
        ends = parse_rfc3339(meta["deletionTimestamp"]) - period_now + wanted
        shorter = copy.deepcopy(current.obj)
        shorter["metadata"]["deletionTimestamp"] = self.store.clock.rfc3339(ends)
        shorter["metadata"]["deletionGracePeriodSeconds"] = wanted
        if options.dry_run:
            return entry(shorter)
        stored = self.store.replace("pods", shorter, expected_rv=None)
        self._reap_later(stored, ends)
        return stored

    def rearm(self) -> None:
        """Timers for the pods found terminating (after a restart from saved state)."""
        for found in list(self.store.objects["pods"].values()):
            deletion = found.obj["metadata"].get("deletionTimestamp")
            if deletion:
                self._reap_later(found, parse_rfc3339(deletion))

    def _reap_later(self, pod: Entry, when: float) -> None:
        meta = pod.obj["metadata"]
        key, uid = key_of(meta.get("namespace"), meta["name"]), meta["uid"]
        self.cluster.timers.at(when, lambda: self._reap(key, uid))

    def _reap(self, key: str, uid: str) -> None:
        """The kubelet's final delete, once the containers are gone."""
        found = self.store.objects["pods"].get(key)
        if found is None or found.obj["metadata"].get("uid") != uid:
            return
        if not found.obj["metadata"].get("deletionTimestamp"):
            return
        self._finish("pods", found)
