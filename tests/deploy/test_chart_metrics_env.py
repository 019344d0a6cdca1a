"""The portal's own metrics in the chart: each process group that counts keeps its files on
its pod's /tmp emptyDir (the root filesystem is read-only), and the worker and watcher serve
theirs on the metrics port."""

from __future__ import annotations

from tests.deploy.chart import all_on_docs, default_docs, deployment, render

COUNTING = ("web", "worker", "watcher")
SERVING = ("worker", "watcher")


def env_of(docs, component: str) -> dict[str, object]:  # type: ignore[no-untyped-def]
    (container,) = deployment(docs, component)["spec"]["template"]["spec"]["containers"]
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def container_of(docs, component: str) -> dict:  # type: ignore[no-untyped-def, type-arg]
    (container,) = deployment(docs, component)["spec"]["template"]["spec"]["containers"]
    return container


def test_the_counting_pods_keep_their_figures_under_tmp() -> None:
    for docs in (default_docs(), all_on_docs()):
        for component in COUNTING:
            env = env_of(docs, component)
            assert env["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/prometheus-multiproc", component
            mounts = {m["mountPath"] for m in container_of(docs, component)["volumeMounts"]}
            assert "/tmp" in mounts, component
        assert "PROMETHEUS_MULTIPROC_DIR" not in env_of(docs, "beat")  # it counts nothing


def test_the_worker_and_watcher_serve_their_figures_on_the_metrics_port() -> None:
    docs = default_docs()
    for component in SERVING:
        assert env_of(docs, component)["METRICS_PORT"] == "9808"
        assert container_of(docs, component)["ports"] == [
            {"name": "metrics", "containerPort": 9808, "protocol": "TCP"}
        ]
    assert "METRICS_PORT" not in env_of(docs, "web")  # its /metrics is on the HTTP port


def test_without_metrics_nothing_is_served() -> None:
    docs = render(sets=("metrics.enabled=false",))
    for component in SERVING:
        assert "METRICS_PORT" not in env_of(docs, component)
        assert "ports" not in container_of(docs, component)
        assert "METRICS_TOKEN" not in env_of(docs, component)
