"""The search box behind every page and GET /api/v1/search/: nodes, pods, moves, pools, in
every cluster the reader may see (each hit names its cluster), the page's own first.

A constant number of SQL queries whatever the number of clusters and their size: the
database narrows the rows by a substring of the JSON text (labels, pods), the core decides
what really matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import Case, Q, QuerySet, TextField, Value, When
from django.db.models.functions import Cast

from pools.core.search import Query, label_matches, parse_query, pod_matches
from pools.models import MoveRequest, Node, Pool

# Rows the database hands over for the core to check; past it a group says "more".
_SCAN_LIMIT = 2000


@dataclass(frozen=True)
class NodeHit:
    cluster: str
    name: str
    pool: str | None
    matched: list[str]  # "name", or the labels that matched as key=value


@dataclass(frozen=True)
class PodHit:
    cluster: str
    name: str
    namespace: str
    node: str
    pool: str | None
    gpus: int


@dataclass(frozen=True)
class MoveHit:
    cluster: str
    id: int
    kind: str
    state: str
    destination: str
    reason: str


@dataclass(frozen=True)
class PoolHit:
    cluster: str
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


def _first(clusters: Sequence[str]) -> Case:
    """An ordering that puts the rows of the first cluster (the page's own) first."""
    return Case(When(cluster=clusters[0], then=Value(0)), default=Value(1))


def _nodes(clusters: Sequence[str]) -> QuerySet[Node]:
    return Node.everywhere.present().filter(cluster__in=clusters).order_by(_first(clusters))


def _node_hits(query: Query, clusters: Sequence[str]) -> list[NodeHit]:
    needle = query.needle
    rows = (
        _nodes(clusters)
        .annotate(labels_text=Cast("labels", TextField()))
        .filter(Q(name__icontains=needle) | Q(labels_text__icontains=needle))
        .values_list("cluster", "name", "pool__name", "labels")[:_SCAN_LIMIT]
    )
    hits = []
    for cluster, name, pool, labels in rows:
        by_name = query.label_key is None and query.text.lower() in name.lower()
        matched = (["name"] if by_name else []) + label_matches(labels, query)
        if matched:
            hits.append(NodeHit(cluster, name, pool, matched))
    return hits


def _pod_hits(query: Query, clusters: Sequence[str]) -> list[PodHit]:
    if query.label_key is not None:
        return []
    needle = query.text.rpartition("/")[2] or query.text
    rows = (
        _nodes(clusters)
        .annotate(pods_text=Cast("pods", TextField()))
        .filter(pods_text__icontains=needle)
        .values_list("cluster", "name", "pool__name", "pods")[:_SCAN_LIMIT]
    )
    return [
        PodHit(cluster, p["name"], p["namespace"], name, pool, int(p.get("gpus", 0)))
        for cluster, name, pool, pods in rows
        for p in pod_matches(pods, query)
    ]


def _move_hits(query: Query, clusters: Sequence[str]) -> list[MoveHit]:
    if query.move_id is None:
        return []
    # Move numbers are the portal's, across clusters: one move at most.
    found = MoveRequest.everywhere.filter(
        pk=query.move_id, destination__cluster__in=clusters
    ).values_list("destination__cluster", "pk", "kind", "state", "destination__name", "reason")
    return [MoveHit(*row) for row in found]


def _pool_hits(query: Query, clusters: Sequence[str]) -> list[PoolHit]:
    if query.label_key is not None:
        return []
    found = (
        Pool.everywhere.active()
        .filter(cluster__in=clusters)
        .filter(Q(name__icontains=query.text) | Q(display_name__icontains=query.text))
        .order_by(_first(clusters), "name")
    )
    return [PoolHit(*row) for row in found.values_list("cluster", "name", "display_name")]


def search(*, text: str, clusters: Sequence[str], limit: int = 20) -> SearchResults:
    """Everything `text` finds in `clusters` (the page's own first), `limit` hits a group at
    most (the rest counted in `more`)."""
    query = parse_query(text)
    results = SearchResults(query, limit)
    if not query.text or not clusters:
        return results
    for group, hits in (
        ("nodes", _node_hits(query, clusters)),
        ("pods", _pod_hits(query, clusters)),
        ("moves", _move_hits(query, clusters)),
        ("pools", _pool_hits(query, clusters)),
    ):
        setattr(results, group, hits[:limit])
        if len(hits) > limit:
            results.more[group] = len(hits) - limit
    return results
