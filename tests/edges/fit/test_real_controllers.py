"""The fit check against workloads the real controllers run: a Deployment and a Job applied
with kubectl to the real control plane, whose ReplicaSet and Job controllers make the pods
and whose kube-scheduler places them; then the check's fix applied with kubectl, and the
pods seen landing in the pool it names. kubesim's own API server serves no Deployments or
Jobs, so these run on the real control plane only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from kubernetes import client

from pools.fit.service import fit_check_run
from pools.inventory import inventory_sync
from tests.edges.fit.test_fit_kubesim import IN_TRAINING, NAMESPACE, POOL_KEY, gpu_pod
from tests.real_cluster import RealCluster
from tests.servers import wait_for

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.parametrize(
        "backend", [pytest.param("kubernetes", marks=pytest.mark.kubernetes)], indirect=True
    ),
]


def kubectl_apply(cluster: RealCluster, text: str) -> None:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed (make test installs it)")
    done = subprocess.run(
        [binary, "--context", "admin", "apply", "-f", "-"],
        input=text,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def placed(
    cluster: RealCluster, selector: str, expected: int, *, allow_more: bool = False
) -> tuple[list[str], int]:
    """(the nodes of the bound pods, the number the scheduler left Unschedulable) once each
    of the `expected` pods (or more, during a rollout) is one or the other."""
    core = cluster.core()

    def decided() -> tuple[list[str], int] | None:
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
        nodes = [p.spec.node_name for p in pods if p.spec.node_name]
        pending = [
            p
            for p in pods
            if not p.spec.node_name
            and any(
                c.type == "PodScheduled" and c.reason == "Unschedulable"
                for c in p.status.conditions or []
            )
        ]
        total = len(nodes) + len(pending)
        enough = total >= expected if allow_more else total == expected
        return (sorted(nodes), len(pending)) if enough and total == len(pods) else None

    # The answer the wait saw: during a rollout a second list may catch the next step.
    answers: list[tuple[list[str], int]] = []

    def seen_decided() -> bool:
        answer = decided()
        if answer is not None:
            answers.append(answer)
        return answer is not None

    try:
        wait_for(seen_decided, timeout=90, what=f"{expected} pods placed")
    except RuntimeError:
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
        seen = [(p.metadata.name, p.spec.node_name, p.status.phase) for p in pods]
        raise AssertionError(f"not {expected} pods placed: {seen}") from None
    answer = answers[-1]
    return answer


def in_namespace(cluster: RealCluster) -> None:
    try:
        cluster.core().create_namespace({"metadata": {"name": NAMESPACE}})
    except client.ApiException as error:
        if error.status != 409:
            raise


def workload(kind: str, name: str, count: int, pod: dict[str, Any]) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]}
    meta = {"name": name, "namespace": NAMESPACE}
    if kind == "Deployment":
        spec = {"replicas": count, "selector": {"matchLabels": {"app": name}}}
        return {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": meta,
            "spec": spec | {"template": template},
        }
    template["spec"] = template["spec"] | {"restartPolicy": "Never"}
    spec = {"parallelism": count, "completions": count, "template": template}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def pools_of(cluster: RealCluster, nodes: list[str]) -> set[str]:
    core = cluster.core()
    return {core.read_node(n).metadata.labels.get(POOL_KEY, "") for n in set(nodes)}


@pytest.mark.parametrize(
    ("kind", "count", "gpus"), [("Deployment", 40, 2), ("Job", 12, 4)], ids=["deployment", "job"]
)
def test_the_replicas_that_fit_now_are_those_the_real_controllers_get_placed(
    cluster: RealCluster, kind: str, count: int, gpus: int
) -> None:
    manifest = workload(kind, f"fit-{kind.lower()}", count, gpu_pod("x", gpus))
    inventory_sync()
    (verdict,) = fit_check_run(manifest=json.dumps(manifest)).report.workloads[0].cluster
    assert 0 < verdict.replicas_fit < count  # some fit, not all: the count is the test

    in_namespace(cluster)
    kubectl_apply(cluster, yaml.safe_dump(manifest))
    nodes, pending = placed(cluster, f"app=fit-{kind.lower()}", count)

    assert len(nodes) == verdict.replicas_fit
    assert pending == count - verdict.replicas_fit
    assert set(nodes) <= set(verdict.nodes_fit)


def test_the_fix_applied_with_kubectl_lands_the_pods_in_its_pool(cluster: RealCluster) -> None:
    """A Deployment asking for the training pool without tolerating its taint waits; the
    check says it does not fit, and names the pools it would fit in now; the fix for one of
    them, applied as it is, rolls the Deployment out there."""
    deployment = workload(
        "Deployment", "no-toleration", 2, gpu_pod("x", 2, expressions=IN_TRAINING)
    )
    inventory_sync()
    check = fit_check_run(manifest=yaml.safe_dump(deployment, sort_keys=False))
    (fit,) = check.report.workloads
    assert fit.cluster[0].replicas_fit == 0 and not fit.fits_now
    # The pool to take: one whose fix, checked again, fits now (as a user would check it).
    target = next(
        pool
        for pool, fix in sorted(check.report.fixes.items())
        if fit_check_run(manifest=fix.text).report.workloads[0].fits_now
    )

    in_namespace(cluster)
    kubectl_apply(cluster, yaml.safe_dump(deployment))
    nodes, pending = placed(cluster, "app=no-toleration", 2)
    assert (nodes, pending) == ([], 2)

    kubectl_apply(cluster, check.report.fixes[target].text)
    # The rollout: the fixed template's pods run, the waiting ones are scaled away.
    wait_for(
        lambda: placed(cluster, "app=no-toleration", 2, allow_more=True)[1] == 0,
        timeout=90,
        what="the rollout",
    )
    nodes, _ = placed(cluster, "app=no-toleration", 2)
    assert len(nodes) == 2
    assert pools_of(cluster, nodes) == {target}
