"""The chart serving several clusters (clusters.entries): CLUSTERS_FILE from a ConfigMap of its
own, one watcher a cluster with selectors that never overlap, the kubeconfigs mounted only in
the pods that call an API server, and the file the chart writes accepted by the portal's own
start, in a web pod (no kubeconfig, KUBE_API_ACCESS=false) as in a worker. Without entries the
chart renders what it rendered before: one watcher, the variables."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.deploy.chart import (
    RELEASE,
    Doc,
    default_docs,
    deployment,
    named,
    of_kind,
    render,
    render_error,
)
from tests.portal.test_settings_process import PRODUCTION_ENV, run_django

NAME = f"{RELEASE}-gpu-pool-portal"
ENTRIES = {
    "clusters": {
        "entries": [
            {
                "name": "eu-west",
                "in_cluster": True,
                "prometheus": {"url": "http://prometheus-operated.monitoring.svc:9090"},
            },
            {
                "name": "us-east",
                "colour": "#2ca02c",
                "kubeconfig": "/etc/portal/kubeconfigs/us-east",
                "prometheus": {
                    "url": "https://prom-us.example.com",
                    "bearer_token_file": "/etc/portal/prometheus/us-east-token",
                },
            },
        ],
        "kubeconfigSecret": "portal-kubeconfigs",
        "prometheusSecret": "portal-prometheus",
    }
}


def values_file(tmp_path: Path, values: dict[str, object]) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def container(doc: Doc) -> Doc:
    return doc["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def env_of(doc: Doc) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(doc).get("env", [])}


def mounts(doc: Doc) -> set[str]:
    return {m["mountPath"] for m in container(doc).get("volumeMounts", [])}


def test_each_further_cluster_has_a_watcher_of_its_own(tmp_path: Path) -> None:
    docs = render(values_file(tmp_path, ENTRIES))
    watchers = {
        d["metadata"]["name"]: d
        for d in of_kind(docs, "Deployment")
        if "-watcher" in d["metadata"]["name"]
    }
    assert sorted(watchers) == [f"{NAME}-watcher", f"{NAME}-watcher-us-east"]
    assert container(watchers[f"{NAME}-watcher"])["command"][-1] == "watch_inventory"
    assert container(watchers[f"{NAME}-watcher-us-east"])["command"][-3:] == [
        "watch_inventory",
        "--cluster",
        "us-east",
    ]
    # No Deployment's selector matches another's pods: two would fight over them.
    deployments = of_kind(docs, "Deployment")
    for owner in deployments:
        selector = owner["spec"]["selector"]["matchLabels"].items()
        for other in deployments:
            labels = other["spec"]["template"]["metadata"]["labels"].items()
            assert (selector <= labels) == (other is owner), (owner["metadata"]["name"], other)
    for watcher in watchers.values():
        assert watcher["spec"]["replicas"] == 1
        assert watcher["spec"]["strategy"]["type"] == "Recreate"


def test_the_kubeconfigs_reach_only_the_pods_that_call_an_api_server(tmp_path: Path) -> None:
    docs = render(values_file(tmp_path, ENTRIES))
    for component in ("worker", "watcher", "watcher-us-east"):
        found = deployment(docs, component)
        assert "/etc/portal/kubeconfigs" in mounts(found), component
        assert "KUBE_API_ACCESS" not in env_of(found), component
    job = named(docs, "Job", f"{NAME}-migrations")
    for where in (deployment(docs, "web"), deployment(docs, "beat"), job):
        assert "/etc/portal/kubeconfigs" not in mounts(where), where["metadata"]["name"]
        assert {"/etc/portal/clusters", "/etc/portal/prometheus"} <= mounts(where)
        assert env_of(where)["KUBE_API_ACCESS"] == "false"
    config = named(docs, "ConfigMap", NAME)["data"]
    assert config["CLUSTERS_FILE"] == "/etc/portal/clusters/clusters.yaml"
    # The variables would describe the first cluster a second time: the start refuses that.
    assert not {"KUBE_IN_CLUSTER", "PROMETHEUS_URL", "CLUSTER_NAME"} & set(config)
    for name in (f"{NAME}-clusters", f"{NAME}-migrations-clusters"):
        written = yaml.safe_load(named(docs, "ConfigMap", name)["data"]["clusters.yaml"])
        assert written == {"clusters": ENTRIES["clusters"]["entries"]}  # type: ignore[index]


def test_the_file_the_chart_writes_starts_the_portal_in_web_and_worker(tmp_path: Path) -> None:
    """The rendered file, its /etc/portal paths moved under tmp_path as the mounts would put
    them, read by the portal's own start with each pod's environment."""
    docs = render(values_file(tmp_path, ENTRIES))
    text = named(docs, "ConfigMap", f"{NAME}-clusters")["data"]["clusters.yaml"]
    etc = tmp_path / "etc"
    (etc / "prometheus").mkdir(parents=True)
    (etc / "prometheus/us-east-token").write_text("east-token\n")
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(text.replace("/etc/portal/", f"{etc}/"))
    shown = (
        "from django.conf import settings as s; "
        "print(s.CLUSTER_NAME, list(s.OTHER_CLUSTERS), s.KUBE_IN_CLUSTER, s.KUBE_API_ACCESS)"
    )
    config = named(docs, "ConfigMap", NAME)["data"]
    web_env = {**config, **env_of(deployment(docs, "web")), **PRODUCTION_ENV}
    web_env = {
        k: v for k, v in web_env.items() if "$(" not in v and k != "PROMETHEUS_MULTIPROC_DIR"
    }
    web = run_django(["shell", "-v", "0", "-c", shown], {**web_env, "CLUSTERS_FILE": str(clusters)})
    assert web.returncode == 0, web.stderr  # the kubeconfig is not mounted in web, nor looked for
    assert web.stdout.split() == ["eu-west", "['us-east']", "True", "False"]
    # The worker needs the kubeconfig: without it the start names the entry and field.
    worker_env = {**config, **env_of(deployment(docs, "worker")), **PRODUCTION_ENV}
    worker_env = {k: v for k, v in worker_env.items() if "$(" not in v}
    worker_env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    worker_env["CLUSTERS_FILE"] = str(clusters)
    missing = run_django(["check"], worker_env)
    assert "clusters[1] (us-east).kubeconfig: cannot read" in missing.stderr
    (etc / "kubeconfigs").mkdir()
    (etc / "kubeconfigs/us-east").write_text("apiVersion: v1\n")
    worker = run_django(["shell", "-v", "0", "-c", shown], worker_env)
    assert worker.returncode == 0, worker.stderr
    assert worker.stdout.split() == ["eu-west", "['us-east']", "True", "True"]


def test_a_variable_beside_the_entries_is_refused_naming_it(tmp_path: Path) -> None:
    values = {**ENTRIES, "config": {"prometheusUrl": "http://prom:9090"}}
    message = render_error(values_file(tmp_path, values))
    assert "config.prometheusUrl: the clusters are described by clusters.entries" in message


def test_a_misspelt_entry_field_is_refused(tmp_path: Path) -> None:
    entry = {"name": "eu-west", "kubeconfg": "/etc/portal/kubeconfigs/eu"}
    message = render_error(values_file(tmp_path, {"clusters": {"entries": [entry]}}))
    assert "kubeconfg" in message


def test_without_entries_one_watcher_and_the_variables() -> None:
    docs = default_docs()
    watchers = [d for d in of_kind(docs, "Deployment") if "-watcher" in d["metadata"]["name"]]
    assert [w["metadata"]["name"] for w in watchers] == [f"{NAME}-watcher"]
    config = named(docs, "ConfigMap", NAME)["data"]
    assert "CLUSTERS_FILE" not in config and config["KUBE_IN_CLUSTER"] == "true"
    assert not [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("clusters")]
