"""The seed's gang schedulers read with their gang size: Volcano's Job (`minAvailable`), a
Volcano PodGroup (`minMember`) and YuniKorn's task groups; what they refuse is refused with
the field named."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from pools.core.fit.findings import ManifestError
from pools.core.fit.workloads import Workload, read_manifest
from tests.core.fit.builders import POOL_KEY, node, report, snapshot
from tests.core.fit.test_fit_advice import findings

GPU_POD = """\
        containers:
        - name: main
          image: trainer:1
          resources: {limits: {nvidia.com/gpu: 8}}"""

VOLCANO_JOB = f"""\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: ddp, namespace: ml-training}}
spec:
  minAvailable: 4
  schedulerName: volcano
  queue: default
  tasks:
  - name: worker
    replicas: 4
    template:
      spec:
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - {{key: {POOL_KEY}, operator: In, values: [training]}}
        tolerations:
        - {{key: workload-training, operator: Exists, effect: NoSchedule}}
{GPU_POD}
"""


def one(text: str) -> Workload:
    (workload,) = read_manifest(textwrap.dedent(text)).workloads
    return workload


def refused(text: str) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        read_manifest(textwrap.dedent(text))
    return [str(p) for p in caught.value.problems]


def test_a_volcano_job_is_read_by_its_tasks_with_min_available_as_its_gang() -> None:
    job = one(VOLCANO_JOB)
    assert (job.kind, job.api_version) == ("Job", "batch.volcano.sh/v1alpha1")
    assert [(t.role, t.path, t.replicas) for t in job.templates] == [
        ("worker", "spec.tasks[0].template.spec", 4)
    ]
    assert job.gang_size == 4
    codes = [f.code for f in job.findings]
    assert "unknown-api-version" not in codes and "other-scheduler" in codes


def test_a_volcano_jobs_min_available_defaults_as_volcanos_webhook_sets_it() -> None:
    two_tasks = VOLCANO_JOB.replace("  minAvailable: 4\n", "").replace(
        "  - name: worker\n    replicas: 4\n",
        "  - name: ps\n    replicas: 1\n    template: {spec: {containers: [{name: ps}]}}\n"
        "  - name: worker\n    replicas: 4\n    minAvailable: 2\n",
    )
    job = one(two_tasks)
    assert [t.replicas for t in job.templates] == [1, 4]
    assert job.gang_size == 3  # ps's replicas (1) and worker's minAvailable (2)


def test_what_volcano_refuses_is_refused_naming_the_field() -> None:
    assert refused(VOLCANO_JOB.replace("minAvailable: 4", "minAvailable: 5")) == [
        "document 1 (Job ddp): spec.minAvailable: Invalid value: 5: Volcano refuses a "
        "minAvailable above the tasks' replicas (4)"
    ]
    no_tasks = VOLCANO_JOB.split("  tasks:")[0] + "  tasks: []\n"
    assert refused(no_tasks) == [
        "document 1 (Job ddp): spec.tasks: Required value: a Volcano Job needs at least one task"
    ]
    # Not the batch/v1 Job's error.
    assert not any("spec.template.spec" in p for p in refused(no_tasks))


def test_a_four_node_gang_on_two_free_training_nodes_is_said_not_to_start() -> None:
    cluster = snapshot(
        node("t0", "training"),
        node("t1", "training"),
        node("t2", "training", used=8),
        node("t3", "training", used=8),
        node("m0", "mixed"),
    )
    found = findings(cluster, _objects(VOLCANO_JOB))
    [gang] = found["gang-larger-than-free-nodes"]
    assert gang.pool == "training"
    assert "a gang of 4 pods (8 GPU each) cannot start at once in pool training" in gang.message
    assert "2 whole free nodes" in gang.message
    (workload,) = report(cluster, _objects(VOLCANO_JOB)).workloads
    assert workload.gang is not None and (workload.gang.size, workload.gang.placed) == (4, 2)


def _objects(text: str) -> dict[str, object]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


GPU_SPEC = {
    "containers": [
        {"name": "main", "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": 8}}}
    ]
}


def yunikorn(groups: object | None) -> str:
    """A batch/v1 Job of 4 pods whose template carries the task groups (as JSON, or as given
    when a string)."""
    annotations = {"yunikorn.apache.org/task-group-name": "workers"}
    if groups is not None:
        text = groups if isinstance(groups, str) else json.dumps(groups)
        annotations["yunikorn.apache.org/task-groups"] = text
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "ddp"},
        "spec": {
            "parallelism": 4,
            "completions": 4,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {**GPU_SPEC, "schedulerName": "yunikorn"},
            },
        },
    }
    return yaml.safe_dump(job, sort_keys=False)


def test_yunikorn_task_groups_make_a_gang_of_their_min_members() -> None:
    groups = [
        {"name": "workers", "minMember": 3, "minResource": {"nvidia.com/gpu": "8"}},
        {"name": "spare", "minMember": 1, "minResource": {"nvidia.com/gpu": "8"}},
    ]
    job = one(yunikorn(groups))
    assert job.pods == 4 and job.gang_size == 4
    assert [g.name for g in job.templates[0].task_groups] == ["workers", "spare"]
    assert one(yunikorn(groups[:1])).gang_size == 3
    # A plain batch/v1 Job without task groups is no gang.
    assert one(yunikorn(None)).gang_size == 0


def test_task_groups_larger_than_the_workload_are_flagged() -> None:
    groups = [{"name": "workers", "minMember": 6, "minResource": {"nvidia.com/gpu": "8"}}]
    job = one(yunikorn(groups))
    assert job.gang_size == 4
    [finding] = [f for f in job.findings if f.code == "task-groups-larger-than-workload"]
    assert "ask for 6 members together, but it runs 4 pods" in finding.message


@pytest.mark.parametrize(
    ("groups", "said"),
    [
        ("not json", "[yunikorn.apache.org/task-groups]: YuniKorn cannot read the task groups"),
        ({"name": "w"}, "[yunikorn.apache.org/task-groups]: YuniKorn reads a JSON list"),
        (
            [{"name": "w", "minMember": 0, "minResource": {}}],
            "[yunikorn.apache.org/task-groups][0].minMember: must be a positive integer",
        ),
        (
            [{"minMember": 2, "minResource": {}}],
            "[yunikorn.apache.org/task-groups][0].name: Required value",
        ),
        (
            [{"name": "w", "minMember": 2}],
            "[yunikorn.apache.org/task-groups][0].minResource: Required value",
        ),
    ],
)
def test_task_groups_yunikorn_refuses_are_refused_naming_the_annotation(
    groups: object, said: str
) -> None:
    [problem] = refused(yunikorn(groups))
    assert problem.startswith(
        "document 1 (Job ddp): spec.template.metadata.annotations[yunikorn.apache.org/task-groups]"
    )
    assert said in problem, problem


POD_GROUP = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "ddp-group"},
    "spec": {"minMember": 3, "queue": "default"},
}
STATEFUL_SET = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "ddp"},
    "spec": {
        "replicas": 4,
        "template": {
            "metadata": {"annotations": {"scheduling.k8s.io/group-name": "ddp-group"}},
            "spec": {**GPU_SPEC, "schedulerName": "volcano"},
        },
    },
}


def test_a_volcano_pod_group_gives_the_pods_that_name_it_its_min_member() -> None:
    manifest = read_manifest(yaml.safe_dump_all([POD_GROUP, STATEFUL_SET]))
    (workload,) = manifest.workloads
    assert workload.gang_size == 3
    assert [f.code for f in manifest.findings] == ["no-pods"]
    alone = read_manifest(yaml.safe_dump(STATEFUL_SET)).workloads[0]
    assert alone.gang_size == 0
    [missing] = [f for f in alone.findings if f.code == "pod-group-not-found"]
    assert "Volcano PodGroup ddp-group" in missing.message
