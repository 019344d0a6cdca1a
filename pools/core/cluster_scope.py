"""Which cluster the work at hand is about, when one portal serves several.

A page or API request, the inventory writer of one cluster and a worker applying a move each
work inside one cluster. They say so once, with `cluster_scope(name)`, and every read of pools
and nodes through `Pool.objects` and `Node.objects` is then that cluster's (pools.models),
without every call naming it: two clusters may each have a `training` pool and a
`gpu-node-001`, and a lookup by name must find the one meant. Outside any scope the cluster is
the portal's own (CLUSTER_NAME).

A context variable, not a thread local: each asyncio task and each thread started by the
request's context sees its own value, and `reset` restores the outer scope exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, TypeVar

_cluster: ContextVar[str | None] = ContextVar("cluster", default=None)
View = TypeVar("View")


def scoped_cluster() -> str | None:
    """The cluster named by the innermost `cluster_scope`, or None outside any."""
    return _cluster.get()


@contextmanager
def cluster_scope(name: str) -> Iterator[str]:
    token = cluster_enter(name)
    try:
        yield name
    finally:
        cluster_leave(token)


def any_cluster(view: View) -> View:
    """Mark a view (a function, or an API view class) that reads every cluster's rows, where
    `?cluster=` is a filter of its own and may name a cluster no longer served (the audit
    log's events keep the cluster they were recorded in)."""
    view.any_cluster = True  # type: ignore[attr-defined]
    return view


def reads_any_cluster(view: Any) -> bool:
    return bool(getattr(view, "any_cluster", False))


def cluster_enter(name: str) -> Token[str | None]:
    """Enter `name`'s scope until `cluster_leave` (for a task, between the worker's signals
    before and after it runs, where no `with` block spans both)."""
    return _cluster.set(name)


def cluster_leave(token: Token[str | None]) -> None:
    _cluster.reset(token)
