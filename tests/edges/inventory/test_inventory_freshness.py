"""The periodic sync notes on the inventory lease how it fared with the API server: an answer
clears the trouble and moves the time of the last answer on; an API server away leaves that
time as it was and says why, and the pages then say the nodes may be stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from pools.inventory.freshness import inventory_freshness
from pools.inventory.sync import inventory_safety_net
from pools.kube.errors import KubeError
from pools.models import InventoryLease
from tests.kubesim_process import kubesim_server


@pytest.mark.django_db
def test_the_periodic_sync_notes_its_last_answer_and_its_trouble(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings.KUBE_CONTEXT = ""
    with kubesim_server(tmp_path / "sim") as sim:
        settings.KUBECONFIG = str(sim.kubeconfig)
        assert "GPU nodes" in inventory_safety_net()
        row = InventoryLease.objects.get()
        assert (row.trouble, row.heard_at is not None) == ("", True)
        answered = row.heard_at
    # The API server is gone; its kubeconfig is left, naming a port nobody listens on.
    with pytest.raises(KubeError):
        inventory_safety_net()
    row = InventoryLease.objects.get()
    assert row.heard_at == answered
    assert "unreachable" in row.trouble or "refused" in row.trouble, row.trouble
    found = inventory_freshness()
    assert found is not None and found.trouble == row.trouble
