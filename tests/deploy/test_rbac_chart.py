"""Least privilege, proved: the chart's own ServiceAccount, ClusterRole and ClusterRoleBinding
(rendered by the real helm) loaded into kubesim and into the real API server, and the
portal run with that account's token alone. The inventory sync, the watcher, the moves
(leave-running and drain-first, by a real Celery worker), a drill, break-glass and the
readiness check succeed, and together call exactly the rules the role grants (the API
server's audit log says which); a write outside the role is refused with 403 and the API
server's message; `kubectl auth can-i --list` shows exactly the role's rules. If the portal
needed a verb the role lacks, this fails: fix the chart, not this test; if a rule is never
called, this fails too: remove it."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from pools import drills
from pools.common.errors import InvalidInput
from pools.drills import new_node
from pools.inventory import inventory_sync
from pools.maintenance.headroom import pool_headroom
from pools.models import AuditEvent, Drill, MoveRequest, Node, Pool
from portal.readiness import check_kubernetes
from tests.deploy.chart import NAMESPACE, default_docs, of_kind, render
from tests.e2e.test_moves_e2e import approve, request_move, wait_out_terminating_pods
from tests.edges.inventory.test_watch_inventory import eventually, listed, watcher
from tests.kubesim.conftest import kubectl, needs_kubectl
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import FINAL, user_in, wait_for_state
from tests.real_cluster import BACKENDS, RealCluster
from tests.servers import RedisServer
from tests.workers import celery_worker

pytestmark = pytest.mark.django_db(transaction=True)
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
# A row of `kubectl auth can-i --list`: a resource, or (blank) non-resource URLs.
CAN_I_ROW = re.compile(
    r"(?P<resource>\S*)\s+\[(?P<urls>[^\]]*)\]\s+\[(?P<names>[^\]]*)\]\s+\[(?P<verbs>[^\]]*)\]"
)
Doc = dict[str, Any]


def chart_rbac() -> list[Doc]:
    """The RBAC objects as `helm install --namespace` creates them: helm template leaves a
    namespaced object's namespace to the install, which puts it in the release's."""
    docs = default_docs()
    found = [dict(doc) for kind in RBAC_KINDS for doc in of_kind(docs, kind)]
    assert [d["kind"] for d in found] == list(RBAC_KINDS), "the chart renders one of each"
    found[0] = {**found[0], "metadata": {"namespace": NAMESPACE, **found[0]["metadata"]}}
    return found


def account_user() -> str:
    (account,) = of_kind(default_docs(), "ServiceAccount")
    return f"system:serviceaccount:{NAMESPACE}:{account['metadata']['name']}"


@pytest.fixture(scope="module", params=BACKENDS)
def limited(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kubesim | RealCluster]:
    """One cluster for the module, knowing the chart's RBAC objects and nothing else of the
    release: kubesim over TLS (kubectl sends tokens only there) with the objects as its RBAC
    file, then the real API server with them created and the account's token requested."""
    if request.param == "kubernetes":
        real = request.getfixturevalue("real_cluster_session")
        real.reset()
        yield with_chart_rbac(real)
        return
    with kubesim_with_rbac(tmp_path_factory.mktemp("rbac-kubesim"), chart_rbac()) as sim:
        yield sim


@contextlib.contextmanager
def kubesim_with_rbac(workdir: Path, objects: list[Doc]) -> Iterator[Kubesim]:
    """kubesim over TLS (kubectl sends tokens only there) with `objects` as its RBAC file,
    read at its start."""
    rbac = workdir / "chart-rbac.yaml"
    rbac.write_text(yaml.safe_dump_all(objects))
    with kubesim_server(workdir, tls=True, extra=["--rbac", str(rbac)]) as sim:
        yield sim


def with_chart_rbac(real: RealCluster) -> RealCluster:
    """The chart's account, role and binding created through the real API (RBAC decides),
    and a context in the kubeconfig, named after the account, with a token for it."""
    from kubernetes import utils

    api = real.api_client()
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    for doc in chart_rbac():
        utils.create_from_dict(api, doc, namespace=NAMESPACE)
    (account,) = of_kind(default_docs(), "ServiceAccount")
    token = core.create_namespaced_service_account_token(
        account["metadata"]["name"], NAMESPACE, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    real.add_context(account_user(), token)
    return real


@pytest.fixture
def as_the_portal(limited: Kubesim, settings) -> Kubesim:  # type: ignore[no-untyped-def]
    """The portal (this process and the workers it starts) with the chart's account only."""
    settings.KUBECONFIG = str(limited.kubeconfig)
    settings.KUBE_CONTEXT = account_user()
    settings.KUBE_IN_CLUSTER = False
    settings.PATCH_BACKOFF_SECONDS = 0.01
    return limited


def portal_client(sim: Kubesim) -> client.CoreV1Api:
    return client.CoreV1Api(
        config.new_client_from_config(config_file=str(sim.kubeconfig), context=account_user())
    )


def requests_by_the_portal(sim: Kubesim) -> list[Doc]:
    return [e for e in sim.audit_events() if e["user"]["username"] == account_user()]


def granted(role: Doc) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def used(event: Doc) -> tuple[str, str, str]:
    ref = event["objectRef"]
    resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    return (ref.get("apiGroup", ""), resource, event["verb"])


def test_everything_the_portal_does_runs_with_the_charts_account_and_uses_every_rule(
    as_the_portal: Kubesim, redis: RedisServer, tmp_path: Path
) -> None:
    """The inventory sync, the watcher, both kinds of move (by a real Celery worker), a
    node-down drill, break-glass and the readiness check, with the chart's account alone:
    none is refused, and together they call every rule the role grants, no fewer (a rule
    never called is a privilege to remove) and no more."""
    report = inventory_sync()
    assert report.gpu_nodes == Node.objects.count() > 0

    with watcher(tmp_path) as watching:  # LIST then WATCH nodes and pods, as its own process
        eventually(lambda: listed(watching), "the watcher's first listing")

    leave = request_move(["a100-reserve-000"], "training")
    drain = request_move(
        ["a100-infer-004"], "mixed", drain_policy="drain-first", drain_deadline_seconds=30
    )
    with celery_worker(tmp_path, name="limited"):
        approve(leave)
        approve(drain, name="arne")
        leave = wait_for_state(leave, FINAL)
        wait_out_terminating_pods(as_the_portal, "a100-infer-004", 3)
        drain = wait_for_state(drain, FINAL)
    assert leave.state == MoveRequest.State.SUCCEEDED, leave.items.get().error
    assert drain.state == MoveRequest.State.SUCCEEDED, drain.items.get().error
    admin = as_the_portal.core()
    assert admin.read_node("a100-reserve-000").metadata.labels["gpu-pool"] == "training"
    assert admin.read_node("a100-infer-004").metadata.labels["gpu-pool"] == "mixed"

    # A node-down drill: the node cordoned, then uncordoned (run here, not by the beat).
    now = timezone.now()
    drill = Drill.objects.create(
        pool=Pool.objects.get(name="training"),
        kind=Drill.Kind.NODE_DOWN,
        node_name="a100-train-001",
        hold_seconds=10,
        started_by=user_in("pool-admins", "rbac-driller"),
        ends_at=now + timedelta(seconds=130),
    )
    assert drills.drill_begin(drill.pk, now=now) is not None
    assert admin.read_node("a100-train-001").spec.unschedulable is True
    finished = drills.drill_finish(drill.pk, now=timezone.now())
    assert finished is not None and finished.error == "", finished.error
    assert not admin.read_node("a100-train-001").spec.unschedulable

    # Break-glass: one node into a pool outside the workflow.
    user_in("pool-admins", "rbac-breaker")
    call_command("assign_node", "gpu-new-000", "inference", user="rbac-breaker", stdout=StringIO())
    assert admin.read_node("gpu-new-000").metadata.labels["gpu-pool"] == "inference"

    # The readiness check of a process with a cluster (the worker's, the watcher's).
    assert check_kubernetes().startswith("cluster default: API server v")

    # A pool's maintenance headroom lists the disruption budgets.
    assert pool_headroom(Pool.objects.get(name="training")).budgets_error is None

    events = requests_by_the_portal(as_the_portal)
    assert [e for e in events if e["responseStatus"]["code"] in (401, 403)] == []
    (role,) = of_kind(default_docs(), "ClusterRole")
    calls = {used(e) for e in events if e.get("objectRef")}
    assert calls == granted(role)
    # Outside the API's resources, only the version (kubesim's audit log leaves it out).
    assert {e["requestURI"].rstrip("/") for e in events if not e.get("objectRef")} <= {"/version"}


def forbidden(call) -> Doc:  # type: ignore[no-untyped-def]
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 403
    status = json.loads(caught.value.body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
    return status


def test_writes_outside_the_role_are_refused_with_the_api_servers_message(
    limited: Kubesim,
) -> None:
    core, user = portal_client(limited), account_user()
    assert core.read_node("gpu-new-000").metadata.name == "gpu-new-000"  # the token works
    status = forbidden(lambda: core.delete_node("gpu-new-000"))
    assert status["message"] == (
        f'nodes "gpu-new-000" is forbidden: User "{user}" cannot delete resource "nodes" '
        'in API group "" at the cluster scope'
    )
    pod = (
        limited.core()
        .list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-new-000")
        .items[0]
    )
    name, namespace = pod.metadata.name, pod.metadata.namespace
    status = forbidden(
        lambda: core.patch_namespaced_pod(name, namespace, {"metadata": {"labels": {"x": "y"}}})
    )
    assert status["message"] == (
        f'pods "{name}" is forbidden: User "{user}" cannot patch resource "pods" '
        f'in API group "" in the namespace "{namespace}"'
    )
    status = forbidden(lambda: core.read_namespaced_pod(name, namespace))  # list, not get
    assert status["message"].endswith(
        f'cannot get resource "pods" in API group "" in the namespace "{namespace}"'
    )
    status = forbidden(lambda: core.delete_namespaced_pod(name, namespace))  # evict instead
    assert status["message"] == (
        f'pods "{name}" is forbidden: User "{user}" cannot delete resource "pods" '
        f'in API group "" in the namespace "{namespace}"'
    )
    assert limited.core().read_node("gpu-new-000")  # still there
    assert limited.core().read_namespaced_pod(name, namespace).metadata.labels.get("x") is None


@needs_kubectl
def test_kubectl_refuses_and_lists_exactly_the_roles_rules(limited: Kubesim) -> None:
    user = account_user()
    refused = kubectl(limited, "delete", "node", "gpu-new-001", context=user, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f'Error from server (Forbidden): nodes "gpu-new-001" is forbidden: User "{user}" '
        'cannot delete resource "nodes" in API group "" at the cluster scope'
    )
    listed = kubectl(limited, "auth", "can-i", "--list", context=user).stdout
    header, *lines = listed.splitlines()
    assert header.split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    resource_rows, url_rows = set(), set()
    for line in lines:
        match = CAN_I_ROW.fullmatch(line.rstrip())
        assert match, line
        verbs = tuple(sorted(match["verbs"].split()))
        if match["resource"]:
            assert match["names"] == "", line  # no rule narrowed to named objects
            resource_rows.add((match["resource"], verbs))
        else:
            url_rows.add((match["urls"], verbs))
    (role,) = of_kind(default_docs(), "ClusterRole")
    expected = {
        (resource if not group else f"{resource}.{group}", tuple(sorted(rule["verbs"])))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    # What every signed-in user may do on any cluster (system:basic-user and
    # system:discovery): ask what it may do, and read the discovery documents.
    everyone = {
        ("selfsubjectaccessreviews.authorization.k8s.io", ("create",)),
        ("selfsubjectrulesreviews.authorization.k8s.io", ("create",)),
    }
    if isinstance(limited, RealCluster):
        # kube-apiserver 1.37's bootstrap policy also lets everyone ask who they are
        # (`kubectl auth whoami`) and read ClusterTrustBundles; kubesim's has neither.
        everyone |= {
            ("selfsubjectreviews.authentication.k8s.io", ("create",)),
            ("clustertrustbundles.certificates.k8s.io", ("get", "list", "watch")),
        }
    assert resource_rows == expected | everyone, listed
    assert {verbs for _, verbs in url_rows} == {("get",)}
    assert {"/api", "/apis", "/version"} <= {urls for urls, _ in url_rows}


def test_a_gpu_fault_drill_is_refused_at_once_where_the_cluster_cannot_inject_one(
    as_the_portal: Kubesim,
) -> None:
    """The chart's account may not use the simulator's control endpoint (kube-apiserver has
    none): the drill is refused before anything is written, and one recorded all the same
    (the cluster changed since) errors at its start instead of holding its pool."""
    inventory_sync()
    training, admin = Pool.objects.get(name="training"), user_in("pool-admins", "drill-admin")
    with pytest.raises(InvalidInput) as refused:
        drills.drill_start(
            pool=training,
            kind=Drill.Kind.GPU_FAULT,
            node_name="a100-train-001",
            hold_seconds=60,
            user=admin,
            now=timezone.now(),
        )
    assert set(refused.value.fields) == {"kind"}
    assert refused.value.fields["kind"] == (
        "A GPU-fault drill needs the cluster simulator: this cluster cannot inject GPU faults: "
        "only the cluster simulator takes them, from an account it allows "
        "(POST /kubesim/gpus answered 403)."
    )
    assert not Drill.objects.exists() and not AuditEvent.objects.exists()

    now = timezone.now()
    drill = Drill.objects.create(
        pool=training,
        kind=Drill.Kind.GPU_FAULT,
        node_name="a100-train-001",
        hold_seconds=60,
        started_by=admin,
        ends_at=now + timedelta(seconds=180),
    )
    ended = drills.drill_begin(drill.pk, now=now)
    assert ended is not None and ended.state == Drill.State.ERRORED, ended.error
    assert "cannot inject GPU faults" in ended.error and ended.finished_at is not None
    assert not Drill.objects.filter(state__in=Drill.ACTIVE_STATES).exists()
    assert list(AuditEvent.objects.values_list("action", flat=True)) == ["drill.errored"]


def with_new_node_drills(
    cluster: Kubesim, tmp_path: Path
) -> contextlib.AbstractContextManager[Kubesim]:
    """The cluster with the role `rbac.newNodeDrills=true` renders: kubesim started afresh
    with it (its RBAC is a file read at start), or the real ClusterRole replaced, and put
    back afterwards (the module's other tests share the cluster)."""
    docs = render(sets=("rbac.newNodeDrills=true",))
    (role,) = of_kind(docs, "ClusterRole")

    @contextlib.contextmanager
    def real() -> Iterator[Kubesim]:
        rbac = client.RbacAuthorizationV1Api(cluster.api_client())
        name = role["metadata"]["name"]
        (default,) = of_kind(default_docs(), "ClusterRole")
        rbac.patch_cluster_role(name, {"rules": role["rules"]})
        try:
            yield cluster
        finally:
            rbac.patch_cluster_role(name, {"rules": default["rules"]})

    if isinstance(cluster, RealCluster):
        return real()
    objects = [dict(d) for kind in RBAC_KINDS for d in of_kind(docs, kind)]
    objects[0] = {**objects[0], "metadata": {"namespace": NAMESPACE, **objects[0]["metadata"]}}
    return kubesim_with_rbac(tmp_path, objects)


def test_the_new_node_drill_uses_exactly_the_rules_its_option_adds(
    as_the_portal: Kubesim,
    settings,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    with with_new_node_drills(as_the_portal, tmp_path) as cluster:
        settings.KUBECONFIG = str(cluster.kubeconfig)
        inventory_sync()
        before = len(requests_by_the_portal(cluster))
        now = timezone.now()
        drill = Drill.objects.create(
            pool=Pool.objects.get(name="training"),
            kind=Drill.Kind.NODE_JOINS,
            node_name="",
            hold_seconds=60,
            started_by=user_in("pool-admins", "rbac-joiner"),
            ends_at=now + timedelta(seconds=180),
        )
        drill.node_name = new_node.node_name_for(drill.pk)
        drill.save(update_fields=["node_name"])
        assert drills.drill_begin(drill.pk, now=now) is not None
        finished = drills.drill_finish(drill.pk, now=timezone.now())
        assert finished is not None and finished.error == "", finished.error
        events = requests_by_the_portal(cluster)[before:]
    assert [e for e in events if e["responseStatus"]["code"] in (401, 403)] == []
    # What the option adds is what the drill uses beyond the default role: both, no more.
    (default,) = of_kind(default_docs(), "ClusterRole")
    calls = {used(e) for e in events if e.get("objectRef")}
    assert calls - granted(default) == {("", "nodes", "create"), ("", "nodes", "delete")}
    (extended,) = of_kind(render(sets=("rbac.newNodeDrills=true",)), "ClusterRole")
    assert granted(extended) - granted(default) == calls - granted(default)


PROBE_KINDS = ("Role", "RoleBinding")


def probe_rbac() -> list[Doc]:
    """The Role and RoleBinding `rbac.noRoomDrills=true` adds, in the release's namespace
    (where `helm install --namespace` puts them)."""
    docs = render(sets=("rbac.noRoomDrills=true",))
    found = [dict(doc) for kind in PROBE_KINDS for doc in of_kind(docs, kind)]
    assert [d["kind"] for d in found] == list(PROBE_KINDS), "the option renders one of each"
    return [{**d, "metadata": {"namespace": NAMESPACE, **d["metadata"]}} for d in found]


def with_probe_drills(
    cluster: Kubesim, tmp_path: Path
) -> contextlib.AbstractContextManager[Kubesim]:
    """The cluster with what `rbac.noRoomDrills=true` adds: kubesim started afresh with it,
    or the Role and RoleBinding created on the real API server and deleted afterwards."""
    added = probe_rbac()

    @contextlib.contextmanager
    def real() -> Iterator[Kubesim]:
        from kubernetes import utils

        api = cluster.api_client()
        for doc in added:
            utils.create_from_dict(api, doc, namespace=NAMESPACE)
        rbac = client.RbacAuthorizationV1Api(api)
        try:
            yield cluster
        finally:
            rbac.delete_namespaced_role_binding(added[1]["metadata"]["name"], NAMESPACE)
            rbac.delete_namespaced_role(added[0]["metadata"]["name"], NAMESPACE)

    if isinstance(cluster, RealCluster):
        return real()
    return kubesim_with_rbac(tmp_path, [*chart_rbac(), *added])


def test_the_lack_of_resources_drill_uses_exactly_the_rules_its_option_adds(
    as_the_portal: Kubesim,
    settings,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    settings.DRILL_NAMESPACE = NAMESPACE
    with with_probe_drills(as_the_portal, tmp_path) as cluster:
        settings.KUBECONFIG = str(cluster.kubeconfig)
        inventory_sync()
        before = len(requests_by_the_portal(cluster))
        drill = drills.drill_start(
            pool=Pool.objects.get(name="training"),
            kind=Drill.Kind.NO_ROOM,
            node_name="",
            hold_seconds=30,
            user=user_in("pool-admins", "rbac-prober"),
            now=timezone.now(),
        )
        assert drills.drill_begin(drill.pk, now=timezone.now()) is not None
        finished = drills.drill_finish(drill.pk, now=timezone.now())
        assert finished is not None and finished.error == "", finished.error
        removed = {c["name"]: c["status"] for c in finished.checks}["removed"]
        events = requests_by_the_portal(cluster)[before:]
    assert removed == "pass"
    assert [e for e in events if e["responseStatus"]["code"] in (401, 403)] == []
    (default,) = of_kind(default_docs(), "ClusterRole")
    calls = {used(e) for e in events if e.get("objectRef")}
    (role, _) = probe_rbac()
    assert (
        calls - granted(default)
        == granted(role)
        == {
            ("", "pods", "create"),
            ("", "pods", "get"),
            ("", "pods", "delete"),
        }
    )
    # Only in the release's namespace.
    probes = [e for e in events if (e.get("objectRef") or {}).get("name") == drill.node_name]
    assert probes and {e["objectRef"]["namespace"] for e in probes} == {NAMESPACE}
