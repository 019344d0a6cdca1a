"""Pools: the defaults from the migration, and definitions Kubernetes would refuse."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from pools.core.taints import Taint
from pools.models import Pool


@pytest.mark.django_db
def test_default_pools_isolate_training_and_inference_by_taints() -> None:
    pools = {p.name: p for p in Pool.objects.all()}
    assert set(pools) == {"training", "inference", "mixed", "shared"}
    training = pools["training"]
    assert training.labels == {"workload-type": "training", "batch-scheduling": "enabled"}
    assert training.taint == Taint("workload-training", "true", "NoSchedule")
    assert pools["inference"].taint == Taint("workload-inference", "true", "NoSchedule")
    assert pools["mixed"].taint is None and pools["shared"].taint is None
    for pool in pools.values():
        pool.full_clean()  # the defaults are valid by our own rules


def new_pool(**overrides: object) -> Pool:
    fields: dict[str, object] = {
        "name": "batch",
        "display_name": "Batch",
        "labels": {"workload-type": "batch"},
    }
    fields.update(overrides)
    return Pool(**fields)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"name": "Batch_Pool"}, "name", "must be a DNS label"),
        ({"name": "x" * 64}, "name", "at most 63 characters"),
        ({"labels": {"bad key!": "x"}}, "labels", "Label key 'bad key!'"),
        ({"labels": {"a/b/c": "x"}}, "labels", "at most one '/'"),
        ({"labels": {"tier": "not ok!"}}, "labels", "Label tier='not ok!'"),
        ({"labels": {"tier": "x" * 64}}, "labels", "at most 63 characters"),
        ({"labels": {"gpu-pool": "batch"}}, "labels", "is the pool key"),
        (
            {"taint_key": "dedicated", "taint_effect": "Sometimes"},
            "taint_effect",
            "must be one of NoSchedule, PreferNoSchedule, NoExecute",
        ),
        ({"taint_value": "true", "taint_effect": "NoSchedule"}, "taint_key", "needs a key"),
        (
            {"taint_key": "workload-training", "taint_value": "true", "taint_effect": "NoSchedule"},
            "taint_key",
            "already pool 'training'",
        ),
        (
            {"labels": {"workload-type": "training"}},
            "labels",
            "workload-type=training is already claimed by pool 'training'",
        ),
        ({"approvals_required": 0}, "approvals_required", "at least one approval"),
        ({"accepted_gpu_models": ["NVIDIA A100"]}, "accepted_gpu_models", "GPU model"),
        (
            {"accepted_gpu_layouts": ["whole", "mig-1g"]},
            "accepted_gpu_layouts",
            "GPU layout 'mig-1g' must be whole, shared, dra, or mig-<profile>",
        ),
        ({"accepted_gpu_layouts": "whole"}, "accepted_gpu_layouts", "must be a list"),
    ],
)
def test_invalid_definitions_are_refused_with_field_and_reason(
    overrides: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        new_pool(**overrides).full_clean()
    errors = caught.value.message_dict
    assert field in errors, errors
    assert any(message in text for text in errors[field]), errors[field]


@pytest.mark.django_db
def test_a_valid_new_pool_is_accepted() -> None:
    pool = new_pool(
        taint_key="dedicated",
        taint_value="batch",
        taint_effect="NoSchedule",
        accepted_gpu_models=["NVIDIA-L40S"],
    )
    pool.full_clean()
    pool.save()
    assert pool.spec().taint == Taint("dedicated", "batch", "NoSchedule")


@pytest.mark.django_db
def test_editing_a_pool_does_not_conflict_with_itself() -> None:
    training = Pool.objects.get(name="training")
    training.min_nodes = 3
    training.full_clean()
