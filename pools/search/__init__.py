"""The search box behind every page and GET /api/v1/search/: nodes, pods, moves, pools.

A constant number of SQL queries whatever the cluster's size: the database narrows the
rows by a substring of the JSON text (labels, pods), the core decides what really matches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q, TextField
from django.db.models.functions import Cast

from pools.core.search import Query, label_matches, parse_query, pod_matches
from pools.models import MoveRequest, Node, Pool

# Rows the database hands over for the core to check; past it a group says "more".
_SCAN_LIMIT = 2000


@dataclass(frozen=True)
class NodeHit:
    name: str
    pool: str | None
    matched: list[str]  # "name", or the labels that matched as key=value


@dataclass(frozen=True)
class PodHit:
    name: str
    namespace: str
    node: str
    pool: str | None
    gpus: int


@dataclass(frozen=True)
class MoveHit:
    id: int
    kind: str
    state: str
    destination: str
    reason: str


@dataclass(frozen=True)
class PoolHit:
    name: str
    display_name: str


@dataclass
class SearchResults:
    query: Query
    limit: int
    nodes: list[NodeHit] = field(default_factory=list)
    pods: list[PodHit] = field(default_factory=list)
    moves: list[MoveHit] = field(default_factory=list)
    pools: list[PoolHit] = field(default_factory=list)
    more: dict[str, int] = field(default_factory=dict)  # group: hits left out past the limit

    @property
    def total(self) -> int:
        shown = len(self.nodes) + len(self.pods) + len(self.moves) + len(self.pools)
        return shown + sum(self.more.values())


def _node_hits(query: Query) -> list[NodeHit]:
    needle = query.needle
    rows = (
        Node.objects.present()
        .annotate(labels_text=Cast("labels", TextField()))
        .filter(Q(name__icontains=needle) | Q(labels_text__icontains=needle))
        .values_list("name", "pool__name", "labels")[:_SCAN_LIMIT]
    )
    hits = []
    for name, pool, labels in rows:
        by_name = query.label_key is None and query.text.lower() in name.lower()
        matched = (["name"] if by_name else []) + label_matches(labels, query)
        if matched:
            hits.append(NodeHit(name, pool, matched))
    return hits


def _pod_hits(query: Query) -> list[PodHit]:
    if query.label_key is not None:
        return []
    needle = query.text.rpartition("/")[2] or query.text
    rows = (
        Node.objects.present()
        .annotate(pods_text=Cast("pods", TextField()))
        .filter(pods_text__icontains=needle)
        .values_list("name", "pool__name", "pods")[:_SCAN_LIMIT]
    )
    return [
        PodHit(p["name"], p["namespace"], name, pool, int(p.get("gpus", 0)))
        for name, pool, pods in rows
        for p in pod_matches(pods, query)
    ]


def _move_hits(query: Query) -> list[MoveHit]:
    if query.move_id is None:
        return []
    found = MoveRequest.objects.filter(pk=query.move_id).values_list(
        "pk", "kind", "state", "destination__name", "reason"
    )
    return [MoveHit(*row) for row in found]


def _pool_hits(query: Query) -> list[PoolHit]:
    if query.label_key is not None:
        return []
    found = Pool.objects.active().filter(
        Q(name__icontains=query.text) | Q(display_name__icontains=query.text)
    )
    return [PoolHit(*row) for row in found.values_list("name", "display_name")]


def search(*, text: str, limit: int = 20) -> SearchResults:
    """Everything `text` finds, `limit` hits a group at most (the rest counted in `more`)."""
    query = parse_query(text)
    results = SearchResults(query, limit)
    if not query.text:
        return results
    for group, hits in (
        ("nodes", _node_hits(query)),
        ("pods", _pod_hits(query)),
        ("moves", _move_hits(query)),
        ("pools", _pool_hits(query)),
    ):
        setattr(results, group, hits[:limit])
        if len(hits) > limit:
            results.more[group] = len(hits) - limit
    return results
