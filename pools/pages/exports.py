"""CSV downloads of the node table, the moves and the audit log, with the filters of their
pages (and of the API): the same FilterSets, so an export holds what the list shows."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import django_filters
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone

from pools.audit.exports import audit_rows
from pools.audit.filters import AuditFilter
from pools.common.roles import Capability, require
from pools.core.cluster_scope import any_cluster
from pools.fleet import exports
from pools.fleet.filters import NodeFilter
from pools.models import AuditEvent, MoveRequest, Node
from pools.moves.exports import move_rows
from pools.moves.filters import MoveFilter


class _Line:
    """csv.writer writes into this and hands the line back, to stream it."""

    def write(self, value: str) -> str:
        return value


def _lines(rows: Iterable[list[object]], per_chunk: int = 500) -> Iterator[str]:
    """The CSV text, a few hundred rows a chunk: one chunk a row costs the server more in
    handing chunks over than in writing them."""
    writer = csv.writer(_Line())
    chunk: list[str] = []
    for row in rows:
        chunk.append(writer.writerow(row))
        if len(chunk) >= per_chunk:
            yield "".join(chunk)
            chunk = []
    if chunk:
        yield "".join(chunk)


def _export(
    request: HttpRequest,
    name: str,
    filterset: django_filters.FilterSet,
    rows: Callable[[QuerySet[Any]], Iterable[list[object]]],
) -> HttpResponse:
    if not filterset.is_valid():
        # Bad input is refused, never exported unfiltered: each field and what is wrong.
        problems = [f"{field}: {' '.join(errors)}" for field, errors in filterset.errors.items()]
        return HttpResponse(
            "\n".join(problems) + "\n", status=400, content_type="text/plain; charset=utf-8"
        )
    response = StreamingHttpResponse(
        _lines(rows(filterset.qs)), content_type="text/csv; charset=utf-8"
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.csv"'
    return response


@require(Capability.VIEW)
def nodes_csv(request: HttpRequest) -> HttpResponse:
    filterset = NodeFilter(request.GET, queryset=Node.objects.all(), request=request)
    return _export(request, "nodes", filterset, exports.node_csv_rows)


@require(Capability.VIEW)
def moves_csv(request: HttpRequest) -> HttpResponse:
    filterset = MoveFilter(request.GET, queryset=MoveRequest.objects.all(), request=request)
    return _export(request, "moves", filterset, move_rows)


@any_cluster
@require(Capability.VIEW)
def audit_csv(request: HttpRequest) -> HttpResponse:
    filterset = AuditFilter(request.GET, queryset=AuditEvent.objects.all(), request=request)
    return _export(request, "audit", filterset, audit_rows)
