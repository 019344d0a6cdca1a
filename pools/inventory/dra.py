"""DRA's objects listed from the API server and kept in one row (`DraSnapshot`).

ResourceSlices, DeviceClasses, ResourceClaims and ResourceClaimTemplates
(`resource.k8s.io/v1`), each in paged LISTs, trimmed to what the allocator reads and written
in one statement. An API server that does not serve the group (a cluster before 1.34, or
kubesim's own server) answers 404: the row then says so, and holds nothing.

The full sync lists them with the nodes; the watcher lists them every
`DRA_SYNC_SECONDS` (claims change as pods come and go, and a fit check a few seconds behind
the scheduler is what the rest of the inventory gives too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from kubernetes import client

from pools.common.cluster_access import current_cluster
from pools.core.dra.inventory import allocated_devices, node_units, read_inventory
from pools.core.fit.claims import NO_DRA, DraState, dra_state
from pools.inventory.version import inventory_version_bump
from pools.kube.client import api_client
from pools.kube.errors import KubeError, KubeRefused
from pools.kube.nodes import Raw, list_pages
from pools.models import DraSnapshot, Node

log = logging.getLogger(__name__)
PAGE_SIZE = 500
ROW = "cluster"


def _row() -> str:
    """The current cluster's snapshot row: the portal's own keeps the name it had."""
    cluster = current_cluster()
    return ROW if cluster == settings.CLUSTER_NAME else f"{ROW}@{cluster}"


@dataclass(frozen=True)
class DraListing:
    served: bool
    slices: list[Raw]
    classes: list[Raw]
    claims: list[Raw]
    templates: list[Raw]


def _all(call: Callable[..., Any], doing: str) -> Iterator[Raw]:
    for page in list_pages(call, doing, PAGE_SIZE):
        yield from page


def _meta(raw: Raw) -> dict[str, str]:
    meta = raw.get("metadata") or {}
    return {k: meta[k] for k in ("name", "namespace") if k in meta}


def dra_list() -> DraListing:
    api = client.ResourceV1Api(api_client())
    try:
        slices = [
            {"spec": r.get("spec") or {}}
            for r in _all(api.list_resource_slice, "listing ResourceSlices")
        ]
    except KubeRefused as error:
        if error.status == 404:
            return DraListing(False, [], [], [], [])
        raise
    classes = [
        {"metadata": _meta(r), "spec": {"selectors": (r.get("spec") or {}).get("selectors") or []}}
        for r in _all(api.list_device_class, "listing DeviceClasses")
    ]
    claims = [
        {
            "metadata": _meta(r),
            "spec": r.get("spec") or {},
            "status": {"allocation": (r.get("status") or {}).get("allocation")},
        }
        for r in _all(api.list_resource_claim_for_all_namespaces, "listing ResourceClaims")
    ]
    templates = [
        {"metadata": _meta(r), "spec": r.get("spec") or {}}
        for r in _all(
            api.list_resource_claim_template_for_all_namespaces, "listing ResourceClaimTemplates"
        )
    ]
    return DraListing(True, slices, classes, claims, templates)


def dra_sync() -> DraListing:
    """List DRA's objects and keep them (one row, one statement); write the DRA units of the
    nodes that have or had some (none in a cluster without DRA: no statement)."""
    listing = dra_list()
    before = DraSnapshot.objects.filter(name=_row()).values_list("unit_nodes", flat=True).first()
    units = node_units(read_inventory(listing.slices), allocated_devices(listing.claims))
    _units_write(units, set(before or ()) - set(units))
    row = DraSnapshot(
        name=_row(),
        served=listing.served,
        slices=listing.slices,
        classes=listing.classes,
        claims=listing.claims,
        templates=listing.templates,
        unit_nodes=sorted(units),
        listed_at=timezone.now(),
    )
    DraSnapshot.objects.bulk_create(
        [row],
        update_conflicts=True,
        unique_fields=["name"],
        update_fields=[
            "served",
            "slices",
            "classes",
            "claims",
            "templates",
            "unit_nodes",
            "listed_at",
        ],
    )
    return listing


def _units_write(units: dict[str, list[list[Any]]], emptied: set[str]) -> None:
    """Each node's DRA units, written where they changed, in bulk; the figures cached under
    the inventory's version are then computed again."""
    names = set(units) | emptied
    if not names:
        return
    rows = list(Node.objects.filter(name__in=names).only("id", "name", "dra_units"))
    changed = []
    for row in rows:
        wanted = units.get(row.name, [])
        if row.dra_units != wanted:
            row.dra_units = wanted
            changed.append(row)
    if changed:
        with transaction.atomic():
            Node.objects.bulk_update(changed, ["dra_units"], batch_size=500)
            inventory_version_bump()


def dra_sync_logged() -> None:
    """`dra_sync`, for the inventory's loops: a failure is logged, and the last listing kept
    (the nodes' inventory goes on without DRA's objects)."""
    try:
        dra_sync()
    except KubeError as error:
        log.warning("DRA objects not listed: %s", error)


_kept: dict[str, tuple[Any, DraState]] = {}  # ROW -> (its listed_at, its state)


def dra_kept() -> DraState:
    """The DRA state as last listed (nothing when never listed). Read once per listing and
    process: one small query says whether the listing is the one read before (at 15,000
    nodes the slices are 120,000 devices, a second of decoding and reading)."""
    stamp = DraSnapshot.objects.filter(name=_row()).values_list("listed_at", flat=True).first()
    if stamp is None:
        return NO_DRA
    cached = _kept.get(_row())
    if cached is not None and cached[0] == stamp:
        return cached[1]
    row = DraSnapshot.objects.filter(name=_row()).first()
    if row is None:
        return NO_DRA
    state = NO_DRA
    if row.served:
        state = dra_state(row.slices, row.classes, row.claims, row.templates)
    _kept[_row()] = (row.listed_at, state)
    return state
