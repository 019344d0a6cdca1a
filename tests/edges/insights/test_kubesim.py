"""End to end on kubesim: the inventory fills the pod history from the simulated cluster,
and the insights and readiness checks read it (the demo scenario, whose answers are known:
two training jobs wait, a training node lost its taint and reserves nothing for the system
daemons, two GPU nodes are unassigned)."""

from __future__ import annotations

import pytest

from pools.inventory import inventory_sync
from tests.api.conftest import api
from tests.kubesim_process import Kubesim

pytestmark = pytest.mark.django_db


def test_insights_and_readiness_of_the_demo_training_pool(cluster: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    inventory_sync()
    body = api(token_for("viewers")).get("/api/v1/pools/training/insights/?days=7").json()
    # big-train and eval-job-2 ask for the training pool and wait, unbound.
    assert body["queue"]["still_pending"] == 2
    assert body["failures"]["total"] == 0
    assert body["replacement"]["level"] == "low"
    checks = {c["name"]: c for c in body["readiness"]}
    assert checks["labels_taints"]["status"] == "fail"
    assert checks["labels_taints"]["concerned"] == ["a100-train-drift-000"]
    # The pretraining jobs run there without asking for the pool; the eval jobs ask for it
    # but tolerate no taint (they landed on the untainted node).
    workloads = checks["workloads_declare"]
    assert workloads["status"] == "fail"
    concerned = " ".join(workloads["concerned"])
    assert "ml-training/llm-pretrain-a100-train-000 (no required gpu-pool=training" in concerned
    assert "ml-training/eval-job-0 (no toleration of workload-training)" in concerned
    assert checks["metrics"]["status"] == "unknown"  # no Prometheus in this test
    # The hand-built drifted node reserves nothing for the system daemons; the others do.
    assert checks["system_reserved"]["status"] == "fail"
    assert checks["system_reserved"]["concerned"] == [
        "a100-train-drift-000 (CPU: nothing reserved; memory: nothing reserved)"
    ]
    assert "gpu-new-000, gpu-new-001" in checks["recognised"]["detail"]
    assert checks["recognised"]["status"] == "pass"


def test_profiles_of_the_demo(cluster: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    inventory_sync()
    body = api(token_for("viewers")).get("/api/v1/profiles/?days=7").json()
    by_owner = {(p["owner"], p["workload_type"]): p for p in body["profiles"]}
    research = next(p for (owner, _), p in by_owner.items() if owner == "research")
    assert research["pods"] == 9 and research["gpus_per_pod"]["max"] == 1
    assert research["concurrency_peak"] == 9
