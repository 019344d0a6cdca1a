"""The workloads: how many of each, how they roll, what they run, and the migration hook."""

from __future__ import annotations

from typing import Any

from tests.deploy.chart import (
    RELEASE,
    all_on_docs,
    default_docs,
    deployment,
    named,
    of_kind,
    render,
    render_error,
)

NAME = f"{RELEASE}-gpu-pool-portal"


def command(doc: dict[str, Any]) -> list[str]:
    return doc["spec"]["template"]["spec"]["containers"][0]["command"]


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_web_runs_gunicorn_with_at_least_two_replicas_and_rolls_without_downtime() -> None:
    web = deployment(default_docs(), "web")
    assert web["spec"]["replicas"] == 2
    assert command(web)[:2] == ["gunicorn", "portal.wsgi:application"]
    assert "--bind=0.0.0.0:8000" in command(web)
    assert web["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert "web.replicas" in render_error(sets=("web.replicas=1",)).replace("/", ".")


def test_the_web_pods_have_a_disruption_budget() -> None:
    docs = default_docs()
    budget = named(docs, "PodDisruptionBudget", f"{NAME}-web")
    web = deployment(docs, "web")
    selector = budget["spec"]["selector"]["matchLabels"]
    assert matches(selector, web["spec"]["template"]["metadata"]["labels"])
    for component in ("worker", "watcher", "beat"):
        labels = deployment(docs, component)["spec"]["template"]["metadata"]["labels"]
        assert not matches(selector, labels), component
    assert 0 < budget["spec"]["minAvailable"] < web["spec"]["replicas"]


def test_workers_scale_independently_of_the_web_pods() -> None:
    docs = render(sets=("worker.replicas=7",))
    assert deployment(docs, "worker")["spec"]["replicas"] == 7
    assert deployment(docs, "web")["spec"]["replicas"] == 2
    assert command(deployment(docs, "worker"))[:4] == ["celery", "-A", "portal", "worker"]


def test_exactly_one_watcher_and_one_beat_replaced_with_recreate() -> None:
    docs = all_on_docs()
    for component in ("watcher", "beat"):
        workload = deployment(docs, component)
        assert workload["spec"]["replicas"] == 1, component
        assert workload["spec"]["strategy"] == {"type": "Recreate"}, component
    assert command(deployment(docs, "watcher")) == ["python", "manage.py", "watch_inventory"]
    assert command(deployment(docs, "beat"))[:4] == ["celery", "-A", "portal", "beat"]
    # The count is not a value at all: setting one is refused, naming it.
    assert "watcher" in render_error(sets=("watcher.replicas=2",))
    assert "beat" in render_error(sets=("beat.replicas=2",))


def test_the_migrations_run_as_a_pre_install_and_pre_upgrade_hook() -> None:
    docs = default_docs()
    job = named(docs, "Job", f"{NAME}-migrations")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    assert command(job) == ["python", "manage.py", "migrate", "--noinput"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_the_migration_hook_needs_nothing_the_release_creates_after_it() -> None:
    # Hooks run before the release's own objects exist: the Job's settings come from a
    # hook ConfigMap created first (lower weight), and it runs under the namespace's
    # default ServiceAccount, which always exists.
    docs = default_docs()
    job = named(docs, "Job", f"{NAME}-migrations")
    config = named(docs, "ConfigMap", f"{NAME}-migrations")
    job_weight = int(job["metadata"]["annotations"]["helm.sh/hook-weight"])
    config_hook = config["metadata"]["annotations"]
    assert config_hook["helm.sh/hook"] == job["metadata"]["annotations"]["helm.sh/hook"]
    assert int(config_hook["helm.sh/hook-weight"]) < job_weight
    spec = job["spec"]["template"]["spec"]
    assert "serviceAccountName" not in spec
    assert spec["automountServiceAccountToken"] is False
    env_from = spec["containers"][0]["envFrom"]
    assert env_from == [{"configMapRef": {"name": f"{NAME}-migrations"}}]
    assert config["data"] == named(docs, "ConfigMap", NAME)["data"]


def test_the_service_sends_traffic_to_the_web_pods_only() -> None:
    docs = default_docs()
    service = named(docs, "Service", NAME)
    selector = service["spec"]["selector"]
    assert matches(selector, deployment(docs, "web")["spec"]["template"]["metadata"]["labels"])
    for component in ("worker", "watcher", "beat"):
        labels = deployment(docs, component)["spec"]["template"]["metadata"]["labels"]
        assert not matches(selector, labels), component
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    web_port = deployment(docs, "web")["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert web_port == {"name": "http", "containerPort": 8000, "protocol": "TCP"}


def test_only_the_pods_that_call_kubernetes_carry_a_token() -> None:
    docs = default_docs()
    account = of_kind(docs, "ServiceAccount")[0]
    assert account["automountServiceAccountToken"] is False
    for component in ("worker", "watcher"):
        spec = deployment(docs, component)["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == account["metadata"]["name"], component
        assert spec["automountServiceAccountToken"] is True, component
    # The web pods call no Kubernetes API: no token, and a process that knows it has none.
    for component in ("web", "beat"):
        spec = deployment(docs, component)["spec"]["template"]["spec"]
        assert spec["automountServiceAccountToken"] is False, component
    config = named(docs, "ConfigMap", NAME)["data"]
    for component, in_cluster in (
        ("web", "false"),
        ("beat", "false"),
        ("worker", "true"),
        ("watcher", "true"),
    ):
        container = deployment(docs, component)["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env.get("KUBE_IN_CLUSTER", config["KUBE_IN_CLUSTER"]) == in_cluster, component


def test_a_settings_change_rolls_the_pods() -> None:
    before = deployment(default_docs(), "worker")["spec"]["template"]["metadata"]["annotations"]
    changed = render(sets=("config.dcgmNodeLabel=hostname",))
    after = deployment(changed, "worker")["spec"]["template"]["metadata"]["annotations"]
    assert before["checksum/config"] != after["checksum/config"]
