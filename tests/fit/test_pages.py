"""The fit page, `POST /api/v1/fit/`, the Pending page and the pool page's pending and
intruder lists, over the demo inventory."""

from __future__ import annotations

import json
from html import unescape

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from pools.core.fit.workloads import MAX_VALUES
from pools.fit.pending import FIT_CHECK, SCHEDULER, pending_pods, pool_intruders
from pools.models import GpuPod, Pool
from pools.pages.fit import FitForm
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.fit.rows import TOLERATE_TRAINING, TRAINING_AFFINITY, gpu_pod
from tests.fit.test_service import DEPLOYMENT, TRAINING_POD
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db

BIG_TRAIN_MESSAGE = (
    "0/25 nodes are available: 5 Insufficient nvidia.com/gpu, 20 node(s) didn't match "
    "Pod's node affinity/selector."
)


def viewer() -> Client:
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    return client


@pytest.fixture
def demo(db):  # type: ignore[no-untyped-def]
    nodes = demo_inventory()
    # The demo's pods as the inventory keeps them: the big job the scheduler gave up on,
    # the third eval job it has not answered yet, and pods on the drifted training node.
    gpu_pod(
        "big-train",
        gpus=8,
        affinity=TRAINING_AFFINITY,
        tolerations=TOLERATE_TRAINING,
        unschedulable_message=BIG_TRAIN_MESSAGE,
        owner_kind="Job",
        owner_name="big-train",
    )
    gpu_pod("eval-job-2", gpus=2, affinity=TRAINING_AFFINITY)
    gpu_pod("finetune-a100-train-drift-000", gpus=4, node="a100-train-drift-000")
    gpu_pod(
        "llm-pretrain-a100-train-000",
        gpus=8,
        node="a100-train-000",
        tolerations=TOLERATE_TRAINING,
    )
    return nodes


def test_fit_page_shows_each_pools_verdict_and_the_fix(demo):  # type: ignore[no-untyped-def]
    response = viewer().post("/fit/", {"manifest": TRAINING_POD})
    assert response.status_code == 200
    html = response.content.decode()
    assert "4 node(s) had untolerated taint {workload-training: true}" in html
    assert 'data-fix="training"' in html
    assert "+  - key: workload-training" in html


def test_fit_page_download_is_the_fixed_manifest(demo):  # type: ignore[no-untyped-def]
    response = viewer().post("/fit/", {"manifest": TRAINING_POD, "download": "training"})
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="manifest-training.yaml"'
    assert "workload-training" in response.content.decode()


def test_fit_page_upload_and_bad_input(demo):  # type: ignore[no-untyped-def]
    upload = SimpleUploadedFile("job.yaml", DEPLOYMENT.encode())
    ok = viewer().post("/fit/", {"upload": upload})
    assert ok.status_code == 200
    assert '<tr data-pool="mixed">' in ok.content.decode()
    assert "27 of 40" in ok.content.decode()
    bad = viewer().post("/fit/", {"manifest": TRAINING_POD.replace(": 2}", ": two}")})
    assert bad.status_code == 400
    assert "spec.containers[0].resources.limits[nvidia.com/gpu]" in bad.content.decode()
    neither = viewer().post("/fit/", {})
    assert neither.status_code == 400


def test_fit_page_prefilled_with_a_pending_pod(demo):  # type: ignore[no-untyped-def]
    response = viewer().get("/fit/?pod=ml-training/big-train")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Pod ml-training/big-train" in html
    assert "0/5 nodes are available: 5 Insufficient nvidia.com/gpu." in html


def test_fit_api_answers_per_pool(demo, token_for):  # type: ignore[no-untyped-def]
    token = token_for("viewers")
    response = api(token).post(
        "/api/v1/fit/", json.dumps({"manifest": DEPLOYMENT}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    (workload,) = body["workloads"]
    assert workload["cluster"][0]["replicas_fit"] == 31
    pools = {p["pool"]: p for p in workload["pools"]}
    assert pools["mixed"]["templates"][0]["replicas_fit"] == 27
    assert pools["training"]["capacity"]["whole_free_nodes"] == 0
    assert "training" in body["fixes"]
    by_pod = api(token).post(
        "/api/v1/fit/",
        json.dumps({"pod": {"namespace": "ml-training", "name": "big-train"}}),
        content_type="application/json",
    )
    assert by_pod.json()["pod"] == "ml-training/big-train"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "non_field_errors"),
        ({"manifest": "x", "pod": {"namespace": "a", "name": "b"}}, "non_field_errors"),
        ({"pod": {"namespace": "a"}}, "pod"),
        ({"manifest": "kind: Pod\nspec: [1]"}, "manifest"),
        ({"pod": {"namespace": "ml-training", "name": "nope"}}, "pod"),
    ],
)
def test_fit_api_bad_input_is_a_400_naming_the_field(demo, token_for, body, field):  # type: ignore[no-untyped-def]
    before = GpuPod.objects.count()
    response = api(token_for("viewers")).post(
        "/api/v1/fit/", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert GpuPod.objects.count() == before


def test_fit_api_refuses_a_megabyte_of_values_naming_the_field_and_the_limit(demo, token_for):  # type: ignore[no-untyped-def]
    manifest = "kind: Pod\nspec:\n  x:\n" + "  - 1\n" * 166_000  # 1 MB, 166,000 values
    response = api(token_for("viewers")).post(
        "/api/v1/fit/", json.dumps({"manifest": manifest}), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"]["manifest"] == [
        f"manifest: more than {MAX_VALUES} keys and values; the fit check reads at most that many"
    ]


@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        (
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - {name: c, resources: {limits: {nvidia.com/gpu: -1}}}",
            "spec.containers[0].resources.limits[nvidia.com/gpu]",
        ),
        (
            "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\n"
            "spec: {replicas: 1180591620717411303424, template: {spec: {containers: [{name: c}]}}}",
            "spec.replicas",
        ),
    ],
)
def test_fit_api_refuses_counts_kubernetes_would_refuse(demo, token_for, manifest, field):  # type: ignore[no-untyped-def]
    # Issue 25, R7: a GPU count of -1 was answered fits_now: true.
    response = api(token_for("viewers")).post(
        "/api/v1/fit/", json.dumps({"manifest": manifest}), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    (problem,) = response.json()["error"]["fields"]["problems"]
    assert problem["field"] == field
    assert problem["message"].startswith("Invalid value: ")


def test_fit_api_needs_a_token():
    response = api().post("/api/v1/fit/", "{}", content_type="application/json")
    assert response.status_code == 401


def test_pending_pods_say_why(demo):  # type: ignore[no-untyped-def]
    pending = {f"{p.pod.namespace}/{p.pod.name}": p for p in pending_pods(now=timezone.now())}
    assert set(pending) == {"ml-training/big-train", "ml-training/eval-job-2"}
    big = pending["ml-training/big-train"]
    assert (big.reason, big.reason_from) == (BIG_TRAIN_MESSAGE, SCHEDULER)
    evaluation = pending["ml-training/eval-job-2"]
    assert evaluation.reason_from == FIT_CHECK
    assert evaluation.reason.startswith("0/25 nodes are available: 1 Insufficient nvidia.com/gpu")


def test_pending_page_and_pool_page_link_to_the_fit_check(demo):  # type: ignore[no-untyped-def]
    html = unescape(viewer().get("/pending/").content.decode())
    assert BIG_TRAIN_MESSAGE in html
    assert "/fit/?pod=ml-training/big-train" in html
    pool_html = viewer().get("/pools/training/").content.decode()
    assert 'data-pod="ml-training/big-train"' in pool_html
    mixed_html = viewer().get("/pools/mixed/").content.decode()
    assert 'data-pod="ml-training/big-train"' not in mixed_html


def test_intruders_are_pods_without_the_pools_toleration(demo):  # type: ignore[no-untyped-def]
    intruders = pool_intruders(Pool.objects.get(name="training"))
    assert [(i.pod.name, i.node_tainted) for i in intruders] == [
        ("finetune-a100-train-drift-000", False)
    ]
    html = viewer().get("/pools/training/").content.decode()
    assert 'data-intruder="ml-training/finetune-a100-train-drift-000"' in html
    assert 'data-intruder="ml-training/llm-pretrain-a100-train-000"' not in html
    assert pool_intruders(Pool.objects.get(name="mixed")) == []


def test_fit_api_takes_the_manifest_as_a_string_only(demo, token_for):  # type: ignore[no-untyped-def]
    response = api(token_for("viewers")).post(
        "/api/v1/fit/",
        json.dumps({"manifest": {"kind": "Pod"}}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"manifest": ["Must be a string, not an object."]}


def test_fit_api_costs_the_same_queries_whatever_the_cluster(
    demo, token_for, django_assert_num_queries, settings
):  # type: ignore[no-untyped-def]
    settings.API_TOKEN_CACHE_SECONDS = 0  # the token read every time: counts not on the clock
    client = api(token_for("viewers"))
    body = json.dumps({"manifest": DEPLOYMENT})
    client.post("/api/v1/fit/", body, content_type="application/json")  # token last-used stamp
    # The token, its user and groups, then pools, nodes and GPU pods.
    with django_assert_num_queries(5) as small:
        assert client.post("/api/v1/fit/", body, content_type="application/json").status_code == 200
    for i in range(30):
        gpu_pod(f"more-{i}", "research", node=f"a100-reserve-00{i % 9}")
    with django_assert_num_queries(len(small.captured_queries)):
        assert client.post("/api/v1/fit/", body, content_type="application/json").status_code == 200


UNPINNED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: anywhere, namespace: research}
spec:
  containers:
  - name: main
    image: cuda
    resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_fit_page_names_the_nodes_in_no_pool_where_a_pod_lands(demo):  # type: ignore[no-untyped-def]
    html = unescape(viewer().post("/fit/", {"manifest": UNPINNED_POD}).content.decode())
    verdict = html.split("data-cluster-verdict>")[1].split("</p>")[0]
    assert "(lands in nodes in no pool, mixed)" in verdict, verdict
    assert "(lands in , " not in verdict


def test_fit_page_says_no_node_has_the_model_and_offers_no_fix(demo):  # type: ignore[no-untyped-def]
    manifest = UNPINNED_POD.replace(
        "spec:\n", "spec:\n  nodeSelector: {nvidia.com/gpu.product: NVIDIA-B200}\n", 1
    )
    response = viewer().post("/fit/", {"manifest": manifest})
    html = unescape(response.content.decode())
    assert response.status_code == 200
    assert 'data-finding="gpu-model-not-in-cluster"' in html
    assert "NVIDIA-B200, and no node in the cluster has that model" in html
    assert "today no node has room for it" not in html
    assert "data-fix=" not in html and 'name="download"' not in html
    assert html.count("data-no-fix") == Pool.objects.active().count()
    # Nor can one be downloaded.
    download = viewer().post("/fit/", {"manifest": manifest, "download": "training"})
    assert "Content-Disposition" not in download


def test_an_oversized_upload_says_only_its_size(demo):  # type: ignore[no-untyped-def]
    big = SimpleUploadedFile("job.yaml", b"#" * (FitForm.MAX_UPLOAD_BYTES + 1))
    response = viewer().post("/fit/", {"upload": big})
    assert response.status_code == 400
    form = response.context["form"]
    assert form.errors["upload"] == [
        f"The file is {FitForm.MAX_UPLOAD_BYTES + 1} bytes; the fit check reads at most "
        f"{FitForm.MAX_UPLOAD_BYTES}."
    ]
    assert form.non_field_errors() == []
    assert "Give one of" not in response.content.decode()
