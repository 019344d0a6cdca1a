"""Upgrading: the migration that gives pools and nodes a cluster attaches the rows already
kept to the cluster the portal serves when it runs, so a single-cluster install upgrades with
no change of configuration."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("pools", "0032_inventory_heard")]
AFTER = [("pools", "0033_cluster_of_pools_and_nodes")]


@pytest.mark.django_db(transaction=True)
def test_the_rows_kept_join_the_cluster_served_when_it_runs(settings) -> None:  # type: ignore[no-untyped-def]
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    pool = old.get_model("pools", "Pool").objects.create(name="batch", display_name="Batch")
    old.get_model("pools", "Node").objects.create(name="gpu-1", pool=pool, last_seen=timezone.now())

    settings.CLUSTER_NAME = "eu-west"
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Pool, Node = new.get_model("pools", "Pool"), new.get_model("pools", "Node")
    assert Pool.everywhere.get(name="batch").cluster == "eu-west"
    assert set(Pool.everywhere.values_list("cluster", flat=True)) == {"eu-west"}
    assert list(Node.everywhere.values_list("name", "cluster", "pool__name")) == [
        ("gpu-1", "eu-west", "batch")
    ]
