"""A drain a disruption budget blocks (issue 25, R6): the eviction is asked again after the
server's Retry-After or a doubling delay, not on every poll, and the audit log gets one row
per change of state, not one per poll."""

from __future__ import annotations

import pytest
from django.utils import timezone
from kubernetes import client

from pools import moves
from pools.inventory import inventory_sync
from pools.models import AuditEvent, MoveRequest, Pool
from pools.moves.execution import run
from pools.moves.execution.drain import EVICTION_RETRY_MAX_SECONDS, Refusal, eviction_delay
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = pytest.mark.both_backends

NODE = "a100-infer-003"
PODS = ["chat-serving-a100-infer-003-0", "chat-serving-a100-infer-003-1"]  # the budget keeps


def budget_keeping_every_chat_pod(sim: Kubesim) -> None:
    client.PolicyV1Api(sim.api_client()).create_namespaced_pod_disruption_budget(
        "ml-serving",
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="chat"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available="100%",
                selector=client.V1LabelSelector(match_labels={"app": "chat-serving"}),
            ),
        ),
    )


def calls(sim: Kubesim, resource: str, verb: str, name: str | None = None) -> int:
    return sum(
        1
        for e in sim.audit_events()
        if e["verb"] == verb
        and e.get("objectRef", {}).get("resource") == resource
        and (name is None or e["objectRef"].get("name") == name)
    )


def evictions_of(sim: Kubesim, pod: str) -> int:
    return sum(
        1
        for e in sim.audit_events()
        if e.get("objectRef", {}).get("subresource") == "eviction"
        and e["objectRef"].get("name") == pod
    )


@pytest.mark.django_db
def test_a_blocked_drain_asks_again_with_backoff_and_logs_the_refusal_once(
    cluster: Kubesim,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.DRAIN_POLL_SECONDS = 0.05
    budget_keeping_every_chat_pod(cluster)
    inventory_sync()
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=[NODE],
        destination=Pool.objects.get(name="mixed"),
        reason="rebalance",
        now=timezone.now(),
        drain_policy="drain-first",
        drain_deadline_seconds=3,
    )
    move = moves.move_approve(
        request=move, approver=user_in("approvers", "arno"), now=timezone.now()
    )

    run.execute_items(run.start_request(move.pk))

    move.refresh_from_db()
    assert move.state == MoveRequest.State.FAILED
    assert f"ml-serving/{PODS[0]}" in move.items.get().error
    refused = AuditEvent.objects.filter(request=move, action="pod.eviction_refused")
    assert sorted(e.message.split(":")[0] for e in refused) == [f"ml-serving/{p}" for p in PODS]
    assert all("The disruption budget chat needs 10 healthy pods" in e.message for e in refused)
    polls = calls(cluster, "pods", "list")
    # 3 s of polls every 0.05 s; each refused pod was asked at 0, 0.05, 0.15, 0.35, 0.75,
    # 1.55 and 3.15 s at most: never once a poll.
    assert polls >= 20
    assert all(2 <= evictions_of(cluster, pod) <= 7 for pod in PODS)


def test_the_next_eviction_waits_for_retry_after_bounded() -> None:
    assert eviction_delay(None, 10.0, poll=5.0) == 10.0
    assert eviction_delay(None, 3600.0, poll=5.0) == EVICTION_RETRY_MAX_SECONDS
    assert eviction_delay(None, 0.0, poll=5.0) == 5.0  # never sooner than the next poll


def test_without_retry_after_the_next_eviction_waits_twice_as_long_up_to_a_bound() -> None:
    assert eviction_delay(None, None, poll=5.0) == 5.0
    assert eviction_delay(Refusal("budget", 0.0, 5.0), None, poll=5.0) == 10.0
    assert eviction_delay(Refusal("budget", 0.0, 20.0), None, poll=5.0) == 30.0
