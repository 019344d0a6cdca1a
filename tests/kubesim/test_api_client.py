"""kubesim driven by the official kubernetes client, as the portal drives a real cluster."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kubesim_process import Kubesim

DEMO_NODES = 25


def names(node_list: client.V1NodeList) -> list[str]:
    return [n.metadata.name for n in node_list.items]


def status_of(exc: ApiException) -> dict:  # type: ignore[type-arg]
    return json.loads(exc.body)


# --- reads ---


def test_list_has_every_node_and_a_resource_version(kubesim_shared: Kubesim) -> None:
    nodes = kubesim_shared.core().list_node()
    assert len(nodes.items) == DEMO_NODES
    assert int(nodes.metadata.resource_version) > 0
    first = nodes.items[0]
    assert first.status.allocatable["nvidia.com/gpu"] == "8"
    assert first.metadata.labels["nvidia.com/gpu.product"].startswith("NVIDIA-")


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("gpu-pool=training", 5),
        ("gpu-pool==inference", 8),
        ("gpu-pool!=training", 20),  # includes the two nodes without the label
        ("gpu-pool in (training,inference)", 13),
        ("gpu-pool notin (training,inference)", 12),
        ("gpu-pool", 23),
        ("!gpu-pool", 2),
        ("gpu-pool=inference,nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3", 3),
    ],
)
def test_label_selectors(kubesim_shared: Kubesim, selector: str, expected: int) -> None:
    assert len(kubesim_shared.core().list_node(label_selector=selector).items) == expected


def test_field_selectors_on_nodes(kubesim_shared: Kubesim) -> None:
    core = kubesim_shared.core()
    assert names(core.list_node(field_selector="metadata.name=gpu-new-001")) == ["gpu-new-001"]
    assert len(core.list_node(field_selector="spec.unschedulable=false").items) == DEMO_NODES
    assert core.list_node(field_selector="spec.unschedulable=true").items == []


def test_unknown_field_selector_is_a_bad_request(kubesim_shared: Kubesim) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim_shared.core().list_node(field_selector="spec.bogus=1")
    assert caught.value.status == 400
    assert status_of(caught.value)["message"] == "field label not supported: spec.bogus"


def test_get_and_not_found(kubesim_shared: Kubesim) -> None:
    core = kubesim_shared.core()
    assert core.read_node("a100-train-000").spec.taints[0].key == "workload-training"
    with pytest.raises(ApiException) as caught:
        core.read_node("no-such-node")
    assert caught.value.status == 404
    body = status_of(caught.value)
    assert body["kind"] == "Status"
    assert body["reason"] == "NotFound"
    assert body["message"] == 'nodes "no-such-node" not found'
    assert body["details"] == {"name": "no-such-node", "kind": "nodes"}


def test_paging_serves_a_consistent_snapshot(kubesim: Kubesim) -> None:
    core = kubesim.core()
    first = core.list_node(limit=10)
    assert len(first.items) == 10
    assert first.metadata.remaining_item_count == DEMO_NODES - 10
    # A node created between pages does not appear in the pages of this list.
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="zz-late-node")))
    second = core.list_node(limit=10, _continue=first.metadata._continue)
    third = core.list_node(limit=10, _continue=second.metadata._continue)
    assert third.metadata._continue is None
    seen = names(first) + names(second) + names(third)
    assert len(seen) == DEMO_NODES == len(set(seen))
    assert "zz-late-node" not in seen
    assert second.metadata.resource_version == first.metadata.resource_version
    assert "zz-late-node" in names(core.list_node())


def test_a_bad_continue_token_is_refused(kubesim_shared: Kubesim) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim_shared.core().list_node(limit=5, _continue="bm90LWEtdG9rZW4=")
    assert caught.value.status == 400


# --- writes: patches of every type ---


def test_strategic_merge_patch_of_labels_and_null_deletes(kubesim: Kubesim) -> None:
    core = kubesim.core()
    before = core.read_node("gpu-new-000")
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "inference"}}})
    after = core.read_node("gpu-new-000")
    assert after.metadata.labels["gpu-pool"] == "inference"
    assert int(after.metadata.resource_version) > int(before.metadata.resource_version)
    assert after.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"  # untouched
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": None}}})
    assert "gpu-pool" not in core.read_node("gpu-new-000").metadata.labels


def test_strategic_merge_patch_replaces_the_whole_taint_list(kubesim: Kubesim) -> None:
    core = kubesim.core()
    core.patch_node(
        "a100-train-000",
        {
            "spec": {
                "taints": [{"key": "workload-inference", "value": "true", "effect": "NoSchedule"}]
            }
        },
    )
    taints = core.read_node("a100-train-000").spec.taints
    # spec.taints has no patch merge key: the old workload-training taint is gone.
    assert [(t.key, t.effect) for t in taints] == [("workload-inference", "NoSchedule")]


def test_json_merge_patch(kubesim: Kubesim) -> None:
    core = kubesim.core()
    core.patch_node(
        "gpu-new-000",
        {"metadata": {"labels": {"team": "vision"}}},
        _content_type="application/merge-patch+json",
    )
    assert core.read_node("gpu-new-000").metadata.labels["team"] == "vision"


def test_json_patch_for_a_list_body(kubesim: Kubesim) -> None:
    core = kubesim.core()
    core.patch_node(
        "gpu-new-000",
        [
            {"op": "add", "path": "/metadata/labels/gpu-pool", "value": "training"},
            {
                "op": "add",
                "path": "/spec/taints",
                "value": [{"key": "workload-training", "value": "true", "effect": "NoSchedule"}],
            },
        ],
    )
    node = core.read_node("gpu-new-000")
    assert node.metadata.labels["gpu-pool"] == "training"
    assert node.spec.taints[0].key == "workload-training"
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            "gpu-new-000",
            [{"op": "test", "path": "/metadata/labels/gpu-pool", "value": "inference"}],
        )
    assert caught.value.status == 422


def test_apply_patch_of_a_pod_is_answered_415(kubesim_shared: Kubesim) -> None:
    # Server-side apply is served for nodes only (see docs/kubesim.md).
    with pytest.raises(ApiException) as caught:
        kubesim_shared.core().patch_namespaced_pod(
            "notebook-a100-reserve-001",
            "research",
            {"metadata": {"labels": {"a": "b"}}},
            field_manager="test",
            _content_type="application/apply-patch+yaml",
        )
    assert caught.value.status == 415
    assert status_of(caught.value)["reason"] == "UnsupportedMediaType"


def test_dry_run_changes_nothing(kubesim: Kubesim) -> None:
    core = kubesim.core()
    before = core.read_node("gpu-new-000")
    answer = core.patch_node(
        "gpu-new-000", {"metadata": {"labels": {"gpu-pool": "x"}}}, dry_run="All"
    )
    assert answer.metadata.labels["gpu-pool"] == "x"
    after = core.read_node("gpu-new-000")
    assert "gpu-pool" not in after.metadata.labels
    assert after.metadata.resource_version == before.metadata.resource_version


def test_an_identical_patch_does_not_bump_the_resource_version(kubesim: Kubesim) -> None:
    core = kubesim.core()
    rv = core.read_node("a100-train-000").metadata.resource_version
    core.patch_node("a100-train-000", {"metadata": {"labels": {"gpu-pool": "training"}}})
    assert core.read_node("a100-train-000").metadata.resource_version == rv


# --- optimistic concurrency ---


def test_stale_resource_version_in_a_patch_is_a_409_conflict(kubesim: Kubesim) -> None:
    core = kubesim.core()
    stale = core.read_node("gpu-new-000").metadata.resource_version
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            "gpu-new-000", {"metadata": {"resourceVersion": stale, "labels": {"x": "2"}}}
        )
    assert caught.value.status == 409
    body = status_of(caught.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on nodes "gpu-new-000": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert core.read_node("gpu-new-000").metadata.labels["x"] == "1"


def test_stale_resource_version_in_a_put_is_a_409_conflict(kubesim: Kubesim) -> None:
    core = kubesim.core()
    node = core.read_node("gpu-new-000")
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"x": "1"}}})
    node.metadata.labels["y"] = "2"
    with pytest.raises(ApiException) as caught:
        core.replace_node("gpu-new-000", node)
    assert caught.value.status == 409
    fresh = core.read_node("gpu-new-000")
    fresh.metadata.labels["y"] = "2"
    assert core.replace_node("gpu-new-000", fresh).metadata.labels["y"] == "2"


# --- validation ---


def test_invalid_labels_and_taints_are_422_with_a_cause_per_field(kubesim: Kubesim) -> None:
    core = kubesim.core()
    before = core.read_node("gpu-new-000").metadata.resource_version
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            "gpu-new-000",
            {
                "metadata": {"labels": {"bad key": "x", "ok": "bad value!"}},
                "spec": {
                    "taints": [
                        {"key": "a", "value": "1", "effect": "Sometimes"},
                        {"key": "b", "value": "1", "effect": "NoSchedule"},
                        {"key": "b", "value": "2", "effect": "NoSchedule"},
                    ]
                },
            },
        )
    assert caught.value.status == 422
    body = status_of(caught.value)
    assert body["reason"] == "Invalid"
    assert body["message"].startswith('Node "gpu-new-000" is invalid: [')
    fields = [cause["field"] for cause in body["details"]["causes"]]
    assert fields == [
        "metadata.labels",
        "metadata.labels",
        "metadata.taints[0].effect",  # kube-apiserver's own path for a node's taints
        "metadata.taints[2]",
    ]
    reasons = [cause["reason"] for cause in body["details"]["causes"]]
    assert reasons == [
        "FieldValueInvalid",
        "FieldValueInvalid",
        "FieldValueNotSupported",
        "FieldValueDuplicate",
    ]
    assert (
        body["details"]["causes"][2]["message"]
        == 'Unsupported value: "Sometimes": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"'
    )
    assert core.read_node("gpu-new-000").metadata.resource_version == before


def test_label_key_length_limits(kubesim: Kubesim) -> None:
    core = kubesim.core()
    long_name = "a" * 64
    with pytest.raises(ApiException) as caught:
        core.patch_node("gpu-new-000", {"metadata": {"labels": {long_name: "x"}}})
    assert "name part must be no more than 63 characters" in status_of(caught.value)["message"]
    prefixed = "example.com/" + "a" * 63
    core.patch_node("gpu-new-000", {"metadata": {"labels": {prefixed: ""}}})
    assert core.read_node("gpu-new-000").metadata.labels[prefixed] == ""


# --- authentication and authorisation ---


def test_missing_or_wrong_token_is_401(kubesim_shared: Kubesim) -> None:
    configuration = client.Configuration()
    configuration.host = kubesim_shared.url
    configuration.api_key = {"authorization": "Bearer wrong"}
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(client.ApiClient(configuration)).list_node()
    assert caught.value.status == 401
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_read_only_token_reads_but_gets_403_on_writes(kubesim_shared: Kubesim) -> None:
    viewer = kubesim_shared.core(read_only=True)
    assert len(viewer.list_node().items) == DEMO_NODES
    with pytest.raises(ApiException) as caught:
        viewer.patch_node("gpu-new-001", {"metadata": {"labels": {"a": "b"}}})
    assert caught.value.status == 403
    body = status_of(caught.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'nodes "gpu-new-001" is forbidden: User "kubesim-viewer" cannot patch resource "nodes" '
        'in API group "" at the cluster scope'
    )
