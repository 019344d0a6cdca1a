"""Manifests read into workloads: every kind, replica counts, gangs, and precise errors."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
import yaml

from pools.core.fit.findings import ManifestError
from pools.core.fit.workloads import (
    JSON,
    MAX_DOCUMENTS,
    MAX_TEXT_BYTES,
    MAX_VALUES,
    YAML,
    Workload,
    read_manifest,
    read_objects,
)

GPU_SPEC = {
    "containers": [
        {"name": "main", "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": 8}}}
    ]
}
CPU_SPEC = {"containers": [{"name": "main", "image": "x"}]}


def template(spec: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {**fields, "template": {"spec": spec or GPU_SPEC}}


def obj(api_version: str, kind: str, spec: dict[str, Any], name: str = "w") -> str:
    """An object as YAML text, so the text path is the one tested."""
    body = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}
    return yaml.safe_dump(body, sort_keys=False)


def one(text: str) -> Workload:
    manifest = read_manifest(textwrap.dedent(text))
    assert len(manifest.workloads) == 1
    return manifest.workloads[0]


def shape(workload: Workload) -> list[tuple[str, str, int]]:
    return [(t.role, t.path, t.replicas) for t in workload.templates]


def errors(text: str) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        read_manifest(textwrap.dedent(text))
    return sorted(str(p) for p in caught.value.problems)


def test_pod() -> None:
    w = one("""
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: research}
        spec:
          containers: [{name: main, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]
    """)
    assert (w.kind, w.name, w.namespace, w.gang_size) == ("Pod", "p", "research", 0)
    assert shape(w) == [("", "spec", 1)]
    assert w.templates[0].shape.requests.gpu == 2


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "ReplicaSet"])
@pytest.mark.parametrize(
    ("replicas", "expected"), [("", 1), ("replicas: 4", 4), ("replicas: 0", 0)]
)
def test_replicated_kinds(kind: str, replicas: str, expected: int) -> None:
    w = one(f"""
        apiVersion: apps/v1
        kind: {kind}
        metadata: {{name: web}}
        spec:
          {replicas}
          template:
            spec:
              containers: [{{name: main, image: x}}]
    """)
    assert shape(w) == [("", "spec.template.spec", expected)]
    assert not w.is_gang


@pytest.mark.parametrize(
    ("fields", "pods"),
    [
        ("", 1),
        ("parallelism: 4", 4),
        ("parallelism: 4\n  completions: 2", 2),
        ("completions: 8", 1),
    ],
)
def test_job_runs_parallelism_pods_at_most_completions(fields: str, pods: int) -> None:
    w = one(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  "
        + fields
        + "\n  template:\n    spec:\n      containers: [{name: main, image: x}]\n"
    )
    assert shape(w) == [("", "spec.template.spec", pods)]


def test_cron_job_reads_its_job_template() -> None:
    w = one(
        obj(
            "batch/v1",
            "CronJob",
            {"schedule": "0 2 * * *", "jobTemplate": {"spec": template(parallelism=2)}},
        )
    )
    assert shape(w) == [("", "spec.jobTemplate.spec.template.spec", 2)]
    assert w.templates[0].shape.requests.gpu == 8


def test_pytorch_job_master_then_workers_is_a_gang() -> None:
    specs = {"Worker": template(replicas=3), "Master": template()}
    w = one(obj("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": specs}))
    assert shape(w) == [
        ("Master", "spec.pytorchReplicaSpecs.Master.template.spec", 1),
        ("Worker", "spec.pytorchReplicaSpecs.Worker.template.spec", 3),
    ]
    assert w.gang_size == 4


def test_min_available_sets_the_gang_size() -> None:
    spec = {
        "runPolicy": {"schedulingPolicy": {"minAvailable": 2}},
        "pytorchReplicaSpecs": {"Worker": template(replicas=4)},
    }
    w = one(obj("kubeflow.org/v1", "PyTorchJob", spec))
    assert (w.pods, w.gang_size) == (4, 2)


def test_mpi_job_launcher_then_workers() -> None:
    specs = {"Worker": template(replicas=2), "Launcher": template(CPU_SPEC, replicas=1)}
    w = one(obj("kubeflow.org/v2beta1", "MPIJob", {"slotsPerWorker": 8, "mpiReplicaSpecs": specs}))
    assert [(t.role, t.replicas, t.shape.requests.gpu) for t in w.templates] == [
        ("Launcher", 1, 0),
        ("Worker", 2, 8),
    ]
    assert w.gang_size == 3


def test_unknown_replica_type_is_read_and_flagged() -> None:
    w = one(obj("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": {"Chief": template()}}))
    assert shape(w) == [("Chief", "spec.pytorchReplicaSpecs.Chief.template.spec", 1)]
    assert [f.code for f in w.findings] == ["unknown-replica-type"]


@pytest.mark.parametrize(
    ("replicas", "autoscaling", "workers", "gang"),
    [
        (4, False, 8, 1 + 8),  # 4 replicas x 2 hosts, all must run
        (1, False, 4, 1 + 4),  # below minReplicas: KubeRay runs minReplicas
        (9, False, 12, 1 + 12),  # above maxReplicas: maxReplicas
        (4, True, 8, 1 + 4),  # with autoscaling the gang is the minimum
    ],
)
def test_ray_cluster(replicas: int, autoscaling: bool, workers: int, gang: int) -> None:
    spec = {
        "enableInTreeAutoscaling": autoscaling,
        "headGroupSpec": {"rayStartParams": {}, **template(CPU_SPEC)},
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": replicas,
                "minReplicas": 2,
                "maxReplicas": 6,
                "numOfHosts": 2,
                **template(),
            },
            {"groupName": "parked", "replicas": 3, "suspend": True, **template()},
        ],
    }
    w = one(obj("ray.io/v1", "RayCluster", spec))
    assert [(t.role, t.replicas) for t in w.templates] == [
        ("head", 1),
        ("worker group gpu", workers),
        ("worker group parked", 0),
    ]
    assert w.templates[1].path == "spec.workerGroupSpecs[0].template.spec"
    assert w.gang_size == gang


def test_job_set_multiplies_replicas_by_job_parallelism() -> None:
    jobs = [
        {
            "name": "workers",
            "replicas": 4,
            "template": {"spec": template(parallelism=2, completions=2)},
        },
        {"name": "driver", "template": {"spec": template(CPU_SPEC)}},
    ]
    w = one(obj("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": jobs}))
    assert shape(w) == [
        ("workers", "spec.replicatedJobs[0].template.spec.template.spec", 8),
        ("driver", "spec.replicatedJobs[1].template.spec.template.spec", 1),
    ]
    assert w.gang_size == 9


def test_many_documents_with_objects_that_make_no_pods() -> None:
    manifest = read_manifest(
        textwrap.dedent("""
        apiVersion: v1
        kind: Service
        metadata: {name: web}
        ---
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          template:
            spec:
              containers: [{name: main, image: x}]
        ---
        apiVersion: apps/v1
        kind: DaemonSet
        metadata: {name: agent}
        """)
    )
    assert [(w.document, w.label) for w in manifest.workloads] == [(3, "Deployment web")]
    assert [(f.code, f.document) for f in manifest.findings] == [
        ("no-pods", 1),
        ("kind-not-checked", 4),
    ]
    assert manifest.format == YAML


def test_a_list_is_read_item_by_item() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
    }
    manifest = read_objects([{"apiVersion": "v1", "kind": "List", "items": [pod, pod]}])
    assert [t.path for w in manifest.workloads for t in w.templates] == [
        "items[0].spec",
        "items[1].spec",
    ]


def test_json_one_or_many_objects() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
    }
    assert read_manifest(json.dumps(pod)).format == JSON
    assert len(read_manifest(json.dumps(pod) + "\n" + json.dumps(pod)).workloads) == 2
    assert len(read_manifest(json.dumps([pod, pod])).workloads) == 2


def test_dates_stay_strings() -> None:
    w = one("""
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          nodeSelector: {release: 2024-06-01}
          containers: [{name: c, image: x}]
    """)
    assert w.templates[0].shape.placement.node_selector == (("release", "2024-06-01"),)


def test_a_quantity_error_names_the_document_the_object_and_the_field() -> None:
    assert errors("""
        apiVersion: v1
        kind: Service
        metadata: {name: web}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          template:
            spec:
              containers:
              - name: main
                resources: {limits: {nvidia.com/gpu: two}}
    """) == [
        "document 2 (Deployment web): spec.template.spec.containers[0].resources"
        '.limits[nvidia.com/gpu]: "two" is not a quantity: quantities must match the regular '
        "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    ]


def test_unquoted_booleans_where_strings_belong() -> None:
    assert errors("""
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          nodeSelector: {gpu: true}
          tolerations: [{key: workload-training, value: true}]
          containers: [{name: c}]
    """) == sorted(
        [
            "document 1 (Pod p): spec.nodeSelector[gpu]: must be a string, not a boolean (true) "
            '(write it in quotes: "true")',
            "document 1 (Pod p): spec.tolerations[0].value: must be a string, not a boolean (true) "
            '(write it in quotes: "true")',
        ]
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # libyaml's words and place: the input ends at line 2, column 1.
        ("kind: [", "manifest: not valid YAML: line 2, column 1: did not find expected node"),
        ("- a\nb: c", "manifest: not valid YAML: line 2, column 1: "),
        (
            '{"kind": "Pod",}',
            "manifest: not valid JSON: line 1, column 16: Expecting property name",
        ),
        (
            "just text",
            "document 1: must be a Kubernetes object (a mapping with apiVersion and kind)",
        ),
        ("metadata: {name: x}", "document 1 (x): kind: Required value: every object needs a kind"),
        (
            "kind: Pod\nmetadata: {name: p}",
            "document 1 (Pod p): spec: Required value: a Pod needs a spec",
        ),
        (
            "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\nspec: {replicas: two}",
            "document 1 (Deployment d): spec.replicas: must be an integer, not a str",
        ),
        (
            "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\nspec: {replicas: -1}",
            "document 1 (Deployment d): spec.replicas: Invalid value: -1: must be greater than "
            "or equal to 0",
        ),
        (  # issue 25, R7: replicas is an int32
            "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\n"
            "spec: {replicas: 1180591620717411303424}",
            "document 1 (Deployment d): spec.replicas: Invalid value: 1180591620717411303424: "
            "must be at most 2147483647 (a 32-bit integer)",
        ),
        (
            "kind: Job\napiVersion: batch/v1\nmetadata: {name: j}\nspec: {parallelism: 2147483648}",
            "document 1 (Job j): spec.parallelism: Invalid value: 2147483648: must be at most "
            "2147483647 (a 32-bit integer)",
        ),
        (  # issue 25, R7: a GPU count of -1 answered "fits now"
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - {name: c, resources: {limits: {nvidia.com/gpu: -1}}}",
            "document 1 (Pod p): spec.containers[0].resources.limits[nvidia.com/gpu]: "
            'Invalid value: "-1": must be greater than or equal to 0',
        ),
        (
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - {name: c, resources: {requests: {cpu: -500m}}}",
            "document 1 (Pod p): spec.containers[0].resources.requests[cpu]: "
            'Invalid value: "-500m": must be greater than or equal to 0',
        ),
        (
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - {name: c, resources: {limits: {nvidia.com/gpu: 0.5}}}",
            "document 1 (Pod p): spec.containers[0].resources.limits[nvidia.com/gpu]: "
            'Invalid value: "500m": must be an integer',
        ),
        (
            "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\nspec: {}",
            "document 1 (Deployment d): spec.template.spec: Required value: a pod template "
            "needs a spec",
        ),
        (
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: {name: c}}",
            "document 1 (Pod p): spec.containers: must be a list, not a mapping",
        ),
        (
            "kind: Service\nmetadata: {name: s}",
            "manifest: no workload in the manifest: the fit check reads Pod, ",
        ),
    ],
)
def test_errors(text: str, expected: str) -> None:
    found = errors(text)
    assert any(e.startswith(expected) for e in found), found


def test_errors_are_listed_for_the_api() -> None:
    with pytest.raises(ManifestError) as caught:
        read_manifest(
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{resources: {limits: {cpu: x}}}]}"
        )
    assert caught.value.as_list() == [
        {
            "document": 1,
            "object": "Pod p",
            "field": "spec.containers[0].resources.limits[cpu]",
            "message": '"x" is not a quantity: quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            "text": str(caught.value),
        }
    ]


def test_size_limits() -> None:
    with pytest.raises(ManifestError, match="at most 1000000"):
        read_manifest("#" * (MAX_TEXT_BYTES + 1))
    with pytest.raises(ManifestError, match=f"at most {MAX_DOCUMENTS}"):
        read_manifest("---\na: 1\n" * (MAX_DOCUMENTS + 1))
    with pytest.raises(ManifestError, match="nested more than 64 levels"):
        read_manifest("a: " + "[" * 70 + "]" * 70)
    with pytest.raises(ManifestError, match="nested more than 64 levels"):
        read_manifest('{"a": ' + "[" * 2000 + "]" * 2000 + "}")


def test_a_billion_laughs_is_refused_not_expanded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([previous] * 10)}]")
    with pytest.raises(ManifestError, match=f"more than {MAX_VALUES} keys and values"):
        read_manifest("\n".join(lines))


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ManifestError, match="nested more than 64 levels"):
        read_manifest("a: &a [*a]")


def test_a_megabyte_of_scalars_is_refused_while_parsed_before_anything_is_built(monkeypatch):  # type: ignore[no-untyped-def]
    # 1 MB of YAML holding 250,000 scalars took 32 s to be refused: pure-Python PyYAML built
    # every object first, and only then were they counted (issue 25, R1).
    text = "kind: Pod\nspec:\n  x:\n" + "  - 1\n" * 166_000
    assert len(text) > 990_000
    built = []
    monkeypatch.setattr(
        yaml.constructor.SafeConstructor,
        "construct_document",
        lambda self, node: built.append(node),
    )
    with pytest.raises(ManifestError, match=f"more than {MAX_VALUES} keys and values"):
        read_manifest(text)
    assert built == []


def test_manifests_are_parsed_by_libyaml_where_pyyaml_has_it() -> None:
    from pools.core.fit import workloads

    assert yaml.__with_libyaml__  # the pinned wheel has it
    assert issubclass(workloads._Loader, yaml.CSafeLoader)


def test_api_version_mismatch_is_flagged() -> None:
    w = one("""
        apiVersion: extensions/v1beta1
        kind: Deployment
        metadata: {name: old}
        spec:
          template:
            spec:
              containers: [{name: c}]
    """)
    assert [f.code for f in w.findings] == ["unknown-api-version"]
    assert "use apps/v1" in w.findings[0].message
