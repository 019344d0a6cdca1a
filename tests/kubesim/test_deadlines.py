"""kubesim's active deadline: the status it writes is the kubelet's, and the workload
model's pods are left to the model (its record is the history the insights tests read)."""

from __future__ import annotations

from kubesim.deadlines import MESSAGE, REASON, deadline_exceeded, enforced
from kubesim.workload import CLASS_LABEL


def test_the_failed_status_is_the_kubelets() -> None:
    running = {
        "phase": "Running",
        "startTime": "2026-06-01T00:00:00Z",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "c",
                "ready": True,
                "state": {"running": {"startedAt": "2026-06-01T00:00:00Z"}},
            }
        ],
    }
    ended = deadline_exceeded(running, "2026-06-01T00:00:15Z")
    assert (ended["phase"], ended["reason"], ended["message"]) == ("Failed", REASON, MESSAGE)
    assert ended["conditions"][0]["status"] == "False"
    (container,) = ended["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 137
    assert container["state"]["terminated"]["startedAt"] == "2026-06-01T00:00:00Z"
    assert running["phase"] == "Running"  # the given status is left as it was


def test_only_a_positive_deadline_outside_the_workload_model_is_enforced() -> None:
    assert enforced({"spec": {"activeDeadlineSeconds": 15}}) == 15
    assert enforced({"spec": {}}) is None
    assert enforced({"spec": {"activeDeadlineSeconds": 0}}) is None
    modelled = {
        "metadata": {"labels": {CLASS_LABEL: "train"}},
        "spec": {"activeDeadlineSeconds": 15},
    }
    assert enforced(modelled) is None
