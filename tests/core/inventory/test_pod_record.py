"""A GPU pod's row read from the API object (pure): times, how it ended, what it waits for."""

from __future__ import annotations

from datetime import UTC, datetime

from pools.core.pod_record import PodLabels, parse_time, pod_record

OBSERVED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def raw(status: dict[str, object], **meta: object) -> dict[str, object]:
    return {
        "metadata": {
            "name": "job-0",
            "namespace": "ml",
            "uid": "u-1",
            "creationTimestamp": "2026-11-30T09:00:00Z",
            "labels": {"kind": "batch", "owner-team": "nlp"},
            **meta,
        },
        "spec": {
            "nodeName": "n1",
            "priority": 1000,
            "initContainers": [
                {"name": "fetch", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}
            ],
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "2"}}}
            ],
        },
        "status": status,
    }


def test_an_evicted_pod_ends_when_it_stopped_being_ready_with_the_pods_reason() -> None:
    status = {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: memory.",
        "startTime": "2026-11-30T09:01:00Z",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": "2026-11-30T09:00:30Z",
            },
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-30T10:00:00Z"},
        ],
    }
    record = pod_record(raw(status), labels=PodLabels("kind", "owner-team"), observed=OBSERVED)
    assert record.scheduled_at == datetime(2026, 11, 30, 9, 0, 30, tzinfo=UTC)
    assert record.started_at == datetime(2026, 11, 30, 9, 1, tzinfo=UTC)
    assert record.finished_at == datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    assert (record.termination_reason, record.exit_code) == ("Evicted", None)
    assert record.termination_message == "The node was low on resource: memory."
    assert (record.workload_type, record.team, record.priority) == ("batch", "nlp", 1000)
    # The init container's 4 CPUs outweigh the app container's 2 (limit as request).
    assert (record.gpus, record.cpu_milli, record.memory_bytes) == (2, 4000, 2**30)


def test_a_preempted_pod_ends_with_its_disruption_condition_s_reason() -> None:
    """The scheduler's preemption leaves the pod no reason of its own and its container only
    "Error", exit 137: the DisruptionTarget condition says what happened."""
    message = "default-scheduler: preempting to accommodate a higher priority pod"
    terminated = {
        "exitCode": 137,
        "reason": "Error",
        "startedAt": "2026-11-30T09:01:00Z",
        "finishedAt": "2026-11-30T09:30:00Z",
    }
    status = {
        "phase": "Failed",
        "conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": message, "lastTransitionTime": "2026-11-30T09:29:30Z"},
        ],
        "containerStatuses": [{"name": "main", "state": {"terminated": terminated}}],
    }  # fmt: skip
    record = pod_record(raw(status), labels=PodLabels("kind", "owner-team"), observed=OBSERVED)
    assert (record.termination_reason, record.exit_code) == ("PreemptionByScheduler", 137)
    assert record.termination_message == message


def test_a_pod_pulling_its_image_has_not_started_and_says_why() -> None:
    status = {
        "phase": "Pending",
        "startTime": "2026-11-30T09:01:00Z",
        "containerStatuses": [
            {"name": "main", "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull"}}}
        ],
    }
    record = pod_record(raw(status), labels=PodLabels(), observed=OBSERVED)
    assert (record.started_at, record.finished_at) == (None, None)
    assert record.waiting_reason == "ErrImagePull"
    assert (record.workload_type, record.team) == ("", "")


def test_a_deleted_pod_is_terminating_since_its_deletion_minus_the_grace_period() -> None:
    status = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "main",
                "restartCount": 1,
                "state": {"running": {"startedAt": "2026-11-30T09:03:00Z"}},
                "lastState": {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "OOMKilled",
                        "startedAt": "2026-11-30T09:02:00Z",
                        "finishedAt": "2026-11-30T09:02:30Z",
                    }
                },
            }
        ],
    }
    pod = raw(status, deletionTimestamp="2026-11-30T11:00:30Z", deletionGracePeriodSeconds=30)
    record = pod_record(pod, labels=PodLabels(), observed=OBSERVED)
    assert record.terminating_since == datetime(2026, 11, 30, 11, 0, tzinfo=UTC)
    # The first start counts, the restart after the OOM kill does not move it.
    assert record.started_at == datetime(2026, 11, 30, 9, 2, tzinfo=UTC)
    assert (record.finished_at, record.restarts) == (None, 1)
    assert (record.termination_reason, record.exit_code) == ("OOMKilled", 137)


def test_times_are_read_as_the_api_writes_them() -> None:
    assert parse_time("2026-11-30T09:16:54Z") == datetime(2026, 11, 30, 9, 16, 54, tzinfo=UTC)
    assert parse_time("2026-11-30T09:16:54.123456+01:00").utcoffset().total_seconds() == 3600
    assert parse_time("yesterday") is None
    assert parse_time(None) is None
