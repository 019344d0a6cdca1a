"""Pool admins create, edit (with a preview of the drift it causes) and retire pools."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from pools.inventory import inventory_sync
from pools.models import Node, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import role_group

# The cluster is kubesim's API server, then the real control plane.
pytestmark = pytest.mark.both_backends


def user_in(role: str) -> Client:
    client = Client()
    user = User.objects.create_user(f"u-{role}")
    user.groups.add(role_group(role))
    client.force_login(user)
    return client


FORM = {
    "display_name": "Training",
    "description": "",
    "labels": "workload-type=training\nbatch-scheduling=enabled",
    "taint_key": "workload-training",
    "taint_value": "true",
    "taint_effect": "NoSchedule",
    "min_nodes": "2",
    "accepted_gpu_models": "",
    "approvals_required": "1",
}


@pytest.mark.django_db
def test_only_pool_admins_reach_pool_management() -> None:
    for role in ("viewers", "requesters", "approvers"):
        client = user_in(role)
        assert client.get("/pools/new/").status_code == 403
        assert client.get("/pools/training/edit/").status_code == 403
        assert client.post("/pools/training/retire/").status_code == 403
    assert user_in("pool-admins").get("/pools/new/").status_code == 200


@pytest.mark.django_db
def test_preview_shows_which_nodes_would_drift_and_save_touches_no_node(cluster: Kubesim) -> None:
    inventory_sync()
    admin = user_in("pool-admins")
    form = {**FORM, "labels": FORM["labels"] + "\ngpu-memory=large", "preview": "1"}
    preview = admin.post("/pools/training/edit/", form).content.decode()
    assert "<strong>4</strong> would become drifted" in preview  # the fifth is drifted already
    assert "+gpu-memory=large" in preview
    assert Pool.objects.get(name="training").labels == {
        "workload-type": "training",
        "batch-scheduling": "enabled",
    }
    saved = admin.post("/pools/training/edit/", {**form, "save": "1"})
    assert saved.status_code == 302
    assert Pool.objects.get(name="training").labels["gpu-memory"] == "large"
    assert Node.objects.filter(pool__name="training", drifted=True).count() == 5
    assert cluster.count("patch") == 0


@pytest.mark.django_db
def test_invalid_definitions_show_the_field_and_reason_and_save_nothing() -> None:
    admin = user_in("pool-admins")
    bad = {
        **FORM,
        "name": "Big Pool",
        "labels": "tier=not ok!",
        "taint_key": "",
        "taint_effect": "Sometimes",
        "save": "1",
    }
    response = admin.post("/pools/new/", bad)
    assert response.status_code == 400  # the form again, refused
    html = response.content.decode()
    assert "must be a DNS label" in html
    assert "Label tier=&#x27;not ok!&#x27;: the value must be empty or consist of" in html
    assert "Select a valid choice. Sometimes is not one of the available choices." in html
    assert not Pool.objects.filter(display_name="Training", name="Big Pool").exists()
    assert (
        admin.post("/pools/new/", {**FORM, "name": "batch", "labels": "oops", "preview": "1"})
        .content.decode()
        .count("Line 1: write labels as key=value")
        == 1
    )


@pytest.mark.django_db
def test_create_a_pool() -> None:
    admin = user_in("pool-admins")
    form = {
        **FORM,
        "name": "batch",
        "display_name": "Batch",
        "labels": "workload-type=batch",
        "taint_key": "dedicated",
        "taint_value": "batch",
        "accepted_gpu_models": "NVIDIA-L40S\nNVIDIA-A100-SXM4-80GB",
        "save": "1",
    }
    assert admin.post("/pools/new/", form).status_code == 302
    pool = Pool.objects.get(name="batch")
    assert pool.accepted_gpu_models == ["NVIDIA-L40S", "NVIDIA-A100-SXM4-80GB"]
    assert str(pool.taint) == "dedicated=batch:NoSchedule"


@pytest.mark.django_db
def test_retiring_a_pool_that_holds_nodes_is_refused_with_the_count(cluster: Kubesim) -> None:
    inventory_sync()
    admin = user_in("pool-admins")
    response = admin.post("/pools/training/retire/", follow=True)
    assert "Pool &#x27;training&#x27; still holds 5 nodes" in response.content.decode()
    assert Pool.objects.get(name="training").retired_at is None
    confirm = admin.get("/pools/shared/retire/").content.decode()
    assert 'id="retire-confirm"' in confirm and Pool.objects.get(name="shared").retired_at is None
    response = admin.post("/pools/shared/retire/", follow=True)
    assert "Pool shared retired." in response.content.decode()
    assert Pool.objects.get(name="shared").retired_at is not None
    assert admin.get("/pools/shared/").status_code == 404


@pytest.mark.django_db
def test_retired_pools_are_listed_restored_and_keep_their_name_with_a_reason() -> None:
    admin = user_in("pool-admins")
    assert admin.post("/pools/shared/retire/").status_code == 302
    active = admin.get("/pools/").content.decode()
    assert 'data-pool-row="training"' in active and 'data-pool-row="shared"' not in active
    retired = admin.get("/pools/?retired=1").content.decode()
    assert 'data-pool-row="shared"' in retired and 'data-pool-row="training"' not in retired
    assert 'action="/pools/shared/restore/"' in retired
    # A new pool cannot take the name, and the page says which pool holds it.
    taken = admin.post("/pools/new/", {**FORM, "name": "shared", "taint_key": "x", "preview": "1"})
    assert "taken by the retired pool" in taken.content.decode()
    # Viewers see the list, without the button; only pool admins restore.
    viewer = user_in("viewers")
    assert "restore/" not in viewer.get("/pools/?retired=1").content.decode()
    assert viewer.post("/pools/shared/restore/").status_code == 403
    response = admin.post("/pools/shared/restore/", follow=True)
    assert "Pool shared restored." in response.content.decode()
    assert Pool.objects.get(name="shared").retired_at is None
    assert admin.get("/pools/shared/").status_code == 200


@pytest.mark.django_db
def test_pools_have_colours_picked_from_the_palette_editable_and_served_as_css() -> None:
    from pools.core.palette import PALETTE

    known = dict(Pool.objects.values_list("name", "colour"))
    assert known["training"] == "#d9822b" and known["inference"] == "#2b7bd9"
    admin = user_in("pool-admins")
    form = admin.get("/pools/new/").content.decode()
    free = next(c for c in PALETTE if c not in known.values())
    assert f'type="color" name="colour" value="{free}"' in form
    new = {**FORM, "name": "batch", "taint_key": "dedicated", "labels": "", "save": "1"}
    assert admin.post("/pools/new/", {**new, "colour": free}).status_code == 302
    assert Pool.objects.get(name="batch").colour == free
    bad = admin.post("/pools/batch/edit/", {**new, "name": "batch", "colour": "red"})
    assert "must be a colour written #rrggbb" in bad.content.decode()
    admin.post("/pools/batch/edit/", {**new, "name": "batch", "colour": "#123456"})
    css = admin.get("/pool-colours.css")
    assert css["Content-Type"].startswith("text/css")
    assert ".pool-colour-batch { --pool-colour: #123456; }" in css.content.decode()
    again = admin.get("/pool-colours.css", HTTP_IF_NONE_MATCH=css["ETag"])
    assert again.status_code == 304  # revalidated, not downloaded again
    page = admin.get("/").content.decode()
    assert '<link rel="stylesheet" href="/pool-colours.css">' in page
    assert 'class="card pool-colour-batch"' in page and "style=" not in page
