"""The fit check over the inventory: the service the page and the API call."""

from __future__ import annotations

import pytest

from pools.fit.service import InvalidFitInput, PodName, fit_check_run
from pools.models import GpuPod
from tests.factories import demo_inventory
from tests.fit.rows import TOLERATE_TRAINING, TRAINING_AFFINITY, gpu_pod

pytestmark = pytest.mark.django_db

TRAINING_POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml-training}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: gpu-pool, operator: In, values: [training]}]
  containers:
  - name: main
    image: trainer:1
    resources: {limits: {nvidia.com/gpu: 2}}
"""


def test_a_pod_without_toleration_is_refused_by_the_tainted_nodes_in_the_schedulers_words():
    demo_inventory()
    check = fit_check_run(manifest=TRAINING_POD)
    (workload,) = check.report.workloads
    training = workload.pool("training").templates[0]
    # The 4 tainted training nodes refuse it; the untainted (drifted) one is full.
    assert training.message == (
        "0/5 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "4 node(s) had untolerated taint {workload-training: true}."
    )
    assert training.replicas_fit == 0
    inference = workload.pool("inference").templates[0]
    assert inference.message == (
        "0/8 nodes are available: 8 node(s) had untolerated taint {workload-inference: true}."
    )
    assert not workload.fits_now


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: chat, namespace: ml-serving}
spec:
  replicas: 40
  selector: {matchLabels: {app: chat}}
  template:
    metadata: {labels: {app: chat}}
    spec:
      containers:
      - name: serve
        image: chat:1
        resources: {limits: {nvidia.com/gpu: 2}}
"""


def test_replicas_that_fit_now_and_where_they_land():
    demo_inventory()
    check = fit_check_run(manifest=DEPLOYMENT)
    (workload,) = check.report.workloads
    (cluster,) = workload.cluster
    # No affinity, no toleration: 9 ready reserve nodes with 7 GPUs free take 3 each, the
    # two unlabelled L40S nodes 2 each; every tainted node refuses it.
    assert (cluster.replicas_wanted, cluster.replicas_fit) == (40, 31)
    assert workload.lands_in == (("", "mixed"),)
    assert workload.pool("mixed").templates[0].replicas_fit == 27
    codes = {f.code for f in check.report.findings}
    assert "gpu-without-pool-affinity" in codes


def test_the_fix_merges_the_pools_scheduling_block():
    demo_inventory()
    check = fit_check_run(manifest=TRAINING_POD)
    fix = check.report.fixes["training"]
    assert "+  - key: workload-training" in fix.diff
    assert "workload-training" in fix.text
    assert check.format == "yaml"


def test_gang_capacity_counts_whole_free_nodes():
    demo_inventory()
    manifest = TRAINING_POD.replace("nvidia.com/gpu: 2", "nvidia.com/gpu: 8")
    check = fit_check_run(manifest=manifest)
    mixed = check.report.workloads[0].pool("mixed")
    # 9 ready reserve nodes each run a 1-GPU notebook: no whole node is free, 7 GPUs at most.
    assert mixed.capacity.whole_free_nodes == 0
    assert mixed.capacity.largest_free_block == 7


def test_running_gpu_pods_take_their_room():
    demo_inventory()
    # The drifted training node's 4 free GPUs go to a pod the inventory saw bound there.
    gpu_pod("squatter", gpus=4, node="a100-train-drift-000")
    check = fit_check_run(manifest=TRAINING_POD)
    training = check.report.workloads[0].pool("training").templates[0]
    assert not training.fits
    assert "Insufficient nvidia.com/gpu" in training.message


def test_a_pending_pod_is_checked_as_the_inventory_holds_it():
    demo_inventory()
    gpu_pod(
        "big-train",
        gpus=8,
        affinity=TRAINING_AFFINITY,
        tolerations=TOLERATE_TRAINING,
    )
    check = fit_check_run(pod=PodName("ml-training", "big-train"))
    assert check.pod is not None and check.pod.name == "big-train"
    training = check.report.workloads[0].pool("training").templates[0]
    assert training.message.startswith("0/5 nodes are available: 5 Insufficient nvidia.com/gpu")
    assert "workload-training" in check.manifest


def test_bad_manifest_names_the_field_and_writes_nothing():
    demo_inventory()
    bad = TRAINING_POD.replace("nvidia.com/gpu: 2", "nvidia.com/gpu: two")
    with pytest.raises(InvalidFitInput) as raised:
        fit_check_run(manifest=bad)
    assert raised.value.status == 400
    (problem,) = raised.value.fields["problems"]
    assert problem["field"] == "spec.containers[0].resources.limits[nvidia.com/gpu]"
    assert GpuPod.objects.count() == 0


def test_unknown_pod_is_a_field_error():
    with pytest.raises(InvalidFitInput) as raised:
        fit_check_run(pod=PodName("ml-training", "nope"))
    assert raised.value.fields == {"pod": ["No live GPU pod ml-training/nope in the inventory."]}


def test_neither_or_both_inputs_are_refused():
    with pytest.raises(InvalidFitInput):
        fit_check_run()
    with pytest.raises(InvalidFitInput):
        fit_check_run(manifest=TRAINING_POD, pod=PodName("a", "b"))
