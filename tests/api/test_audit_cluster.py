"""Every audited event records the cluster its portal serves (CLUSTER_NAME), so the logs of
several clusters' portals read together: on the API (and its ?cluster= filter) and in the
CSV export. Events recorded before a portal is renamed keep the name they were written
under."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from pools.audit import audit
from pools.models import AuditEvent
from tests.api.conftest import api
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db


def test_each_event_records_the_cluster_and_the_api_filters_by_it(token_for, settings) -> None:  # type: ignore[no-untyped-def]
    settings.CLUSTER_NAME = "eu-west"
    first = audit("pool.created", message="training")
    settings.CLUSTER_NAME = "eu-west-2"  # the portal renamed: earlier events keep theirs
    second = audit("pool.created", message="inference")
    assert AuditEvent.objects.get(pk=first.pk).cluster == "eu-west"
    assert AuditEvent.objects.get(pk=second.pk).cluster == "eu-west-2"

    client = api(token_for("viewers"))
    body = client.get("/api/v1/audit-events/?cluster=eu-west").json()
    assert [(e["id"], e["cluster"]) for e in body["results"]] == [(first.pk, "eu-west")]

    page = Client()
    page.force_login(user_in("viewers", "vera"))
    text = b"".join(page.get("/export/audit.csv").streaming_content).decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:3] == ["at", "cluster", "actor"]
    assert sorted(r[1] for r in rows[1:]) == ["eu-west", "eu-west-2"]
