"""CSV exports: the node table, the moves and the audit log, with their pages' filters."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.audit import audit
from pools.core.csv_cells import cell
from pools.models import AuditEvent, MoveRequest, Pool
from pools.moves import move_reject, move_request_create
from tests.factories import Group, demo_inventory, node_and_pods, store
from tests.moves_helpers import user_in


def test_a_cell_never_becomes_a_formula() -> None:
    assert cell('=HYPERLINK("http://x")') == '\'=HYPERLINK("http://x")'
    assert [cell(v) for v in ("+1", "-1", "@SUM(A1)", "\tx")] == ["'+1", "'-1", "'@SUM(A1)", "'\tx"]
    assert [cell(v) for v in (-1, 2.5, None, True, "a-b")] == [-1, 2.5, "", "true", "a-b"]


def download(client: Client, url: str) -> list[dict[str, str]]:
    response = client.get(url)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert re.fullmatch(
        r'attachment; filename="\w+-\d{8}-\d{6}\.csv"', response["Content-Disposition"]
    )
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture
def viewer(db) -> Client:  # type: ignore[no-untyped-def]
    demo_inventory()
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    return client


def _ask(nodes: list[str], reason: str, requester: str = "rita") -> MoveRequest:
    return move_request_create(
        requested_by=user_in("requesters", requester),
        node_names=nodes,
        destination=Pool.objects.get(name="shared"),
        reason=reason,
        now=timezone.now(),
    )


@pytest.mark.django_db
def test_node_export_has_the_pool_pages_filters(viewer: Client) -> None:
    page = viewer.get("/pools/training/?drifted=true").content.decode()
    link = re.search(r'href="([^"]+)" data-export="nodes"', page).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    assert link == "/export/nodes.csv?drifted=true&pool=training&gone=false"
    rows = download(viewer, link)
    assert [r["name"] for r in rows] == ["a100-train-drift-000"]
    row = rows[0]
    assert (row["pool"], row["gpus"], row["allocated"], row["unallocated"]) == (
        "training",
        "8",
        "8",
        "0",
    )
    assert (row["drifted"], row["pods"], row["util_percent"]) == ("true", "3", "")  # no metrics

    unassigned = viewer.get("/pools/unassigned/").content.decode()
    assert 'href="/export/nodes.csv?unassigned=true&amp;gone=false"' in unassigned
    assert [r["name"] for r in download(viewer, "/export/nodes.csv?unassigned=true")] == [
        "gpu-new-000",
        "gpu-new-001",
    ]


@pytest.mark.django_db
def test_move_export_lists_each_request_with_its_nodes(viewer: Client) -> None:
    first = _ask(["a100-reserve-000", "a100-reserve-001"], "=cmd|' /C calc'!A0")
    second = _ask(["a100-reserve-002"], "second", requester="ravi")
    move_reject(request=second, approver=user_in("approvers"), reason="no", now=timezone.now())
    page = viewer.get("/moves/?state=all").content.decode()
    assert 'href="/export/moves.csv?state=" data-export="moves"' not in page
    rows = download(viewer, "/export/moves.csv")
    assert [(r["id"], r["nodes"], r["state"]) for r in rows] == [
        (str(second.pk), "a100-reserve-002", "rejected"),
        (str(first.pk), "a100-reserve-000 a100-reserve-001", "pending"),
    ]
    assert rows[1]["reason"] == "'=cmd|' /C calc'!A0"  # a formula no spreadsheet runs
    assert rows[1]["requested_by"] == "rita" and rows[1]["approvals"] == "0"
    # The page's filters: its tab (pending by default) and the others.
    link = re.search(r'href="([^"]+)" data-export="moves"', viewer.get("/moves/").content.decode())
    assert link is not None
    assert [r["id"] for r in download(viewer, link.group(1).replace("&amp;", "&"))] == [
        str(first.pk)
    ]
    assert [r["id"] for r in download(viewer, "/export/moves.csv?node=a100-reserve-002")] == [
        str(second.pk)
    ]


@pytest.mark.django_db
def test_audit_export_and_page_filter_by_time_actor_node_and_type(viewer: Client) -> None:
    move = _ask(["a100-reserve-000"], "one")
    move_reject(request=move, approver=user_in("approvers", "abe"), reason="no", now=timezone.now())
    audit("node.patched", node_name="a100-reserve-000", before={"labels": {"a": "1"}}, after={})
    (patched,) = download(viewer, "/export/audit.csv?action=node.patched")
    assert json.loads(patched["before"]) == {"labels": {"a": "1"}} and patched["after"] == ""
    rows = download(viewer, "/export/audit.csv?actor=abe")
    assert [(r["action"], r["move"], r["message"]) for r in rows] == [
        ("move.rejected", str(move.pk), "no")
    ]
    moves_only = AuditEvent.objects.filter(action__startswith="move.").count()
    assert len(download(viewer, "/export/audit.csv?action=move.")) == moves_only
    future = (timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert download(viewer, f"/export/audit.csv?since={future}") == []
    assert len(download(viewer, f"/export/audit.csv?until={future}")) == AuditEvent.objects.count()

    page = viewer.get(f"/audit/?until={future}&action=move.rejected").content.decode()
    assert re.findall(r'data-event="([^"]+)"', page) == ["move.rejected"]
    assert f'name="until" value="{future}"' in page
    assert '<option value="move.rejected">' in page  # the event types the log holds
    assert (
        f'href="/export/audit.csv?until={future.replace(":", "%3A")}&amp;action=move.rejected"'
        in page
    )


@pytest.mark.django_db
def test_a_bad_filter_is_a_400_naming_the_field(viewer: Client) -> None:
    response = viewer.get("/export/audit.csv?since=yesterday&request=-1")
    assert response.status_code == 400
    assert re.search(r"^since: ", response.content.decode(), re.M)
    assert re.search(r"^request: ", response.content.decode(), re.M)
    assert viewer.get("/export/nodes.csv?ready=maybe").status_code == 400
    assert viewer.get("/export/moves.csv?state=nonsense").status_code == 400


@pytest.mark.django_db
def test_exports_need_the_view_role() -> None:
    assert Client().get("/export/nodes.csv").status_code == 302
    nobody = Client()
    nobody.force_login(user_in("no-role", "nora"))
    for what in ("nodes", "moves", "audit"):
        assert nobody.get(f"/export/{what}.csv").status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize("what", ["nodes", "moves", "audit"])
def test_query_count_is_constant(viewer: Client, what: str) -> None:
    """Each export costs the same queries for 3 moves or 60 (nodes: 10 or 400 extra)."""
    counts = []
    for extra, moves in ((10, 3), (400, 60)):
        start = len(counts) and 10
        store(
            node_and_pods(f"extra-{start + i:04d}", Group("extra", 1, "mixed"))
            for i in range(extra)
        )
        for i in range(moves):
            _ask([f"extra-{start + i:04d}"], f"m{i}")
        with CaptureQueriesContext(connection) as queries:
            assert len(download(viewer, f"/export/{what}.csv")) > 0
        counts.append(len(queries))
    assert counts[0] == counts[1]
