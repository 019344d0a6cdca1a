"""CLUSTERS_FILE at start: the one cluster's connection taken from it (kubeconfig, context,
Prometheus with its secrets read from files, its pool label key), and a start refused, naming
the entry and the field, for a malformed file, a file it names that cannot be read, or the
first cluster described by the variables as well. Every further entry is served, with its own
access.
A shared querier's cluster label reaches the settings the queries are narrowed by, from the
file or from the variables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from portal.clusters_file import CLUSTER_VARIABLES, cluster_settings, clusters_file_load
from portal.env import EnvError
from tests.portal.test_settings_process import PRODUCTION_ENV, run_django


def write(tmp_path: Path, clusters: list[dict[str, object]]) -> Path:
    path = tmp_path / "clusters.yaml"
    path.write_text(yaml.safe_dump({"clusters": clusters}))
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    found = {}
    for name, text in (("kubeconfig", "apiVersion: v1\n"), ("token", "s3cret-token\n")):
        found[name] = tmp_path / name
        found[name].write_text(text)
    return found


def eu_west(files: dict[str, Path], **fields: object) -> dict[str, object]:
    return {
        "name": "eu-west",
        "kubeconfig": str(files["kubeconfig"]),
        "context": "eu-west-admin",
        "pool_label_key": "example.com/pool",
        "prometheus": {
            "url": "https://prom-eu.example.com",
            "bearer_token_file": str(files["token"]),
            "headers": {"X-Scope-OrgID": "eu"},
        },
        **fields,
    }


def without_cluster_variables() -> dict[str, str]:
    return {name: "" for name in (*CLUSTER_VARIABLES, "POOL_LABEL_KEY")}


def test_the_portal_takes_its_cluster_from_the_file(tmp_path: Path, files) -> None:  # type: ignore[no-untyped-def]
    path = write(tmp_path, [eu_west(files)])
    shown = (
        "from django.conf import settings as s; print(s.CLUSTER_NAME, s.KUBECONFIG, "
        "s.KUBE_CONTEXT, s.PROMETHEUS_URL, s.PROMETHEUS_BEARER_TOKEN, s.POOL_LABEL_KEY, "
        "s.PROMETHEUS_HEADERS)"
    )
    env = {**PRODUCTION_ENV, **without_cluster_variables(), "CLUSTERS_FILE": str(path)}
    result = run_django(["shell", "-v", "0", "-c", shown], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(" ", 6) == [
        "eu-west",
        str(files["kubeconfig"]),
        "eu-west-admin",
        "https://prom-eu.example.com",
        "s3cret-token",
        "example.com/pool",
        "{'X-Scope-OrgID': 'eu'}\n",
    ]


def test_a_malformed_file_stops_the_start_naming_entry_and_field(tmp_path: Path, files) -> None:  # type: ignore[no-untyped-def]
    path = write(tmp_path, [eu_west(files, colour="blue")])
    env = {**PRODUCTION_ENV, **without_cluster_variables(), "CLUSTERS_FILE": str(path)}
    result = run_django(["check"], env)
    assert result.returncode != 0
    assert "CLUSTERS_FILE: clusters[0] (eu-west).colour: expected a colour" in result.stderr


def test_a_file_an_entry_names_must_be_readable(tmp_path: Path, files) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "gone.pem"
    prometheus = {"url": "https://p.example.com", "ca_file": str(missing)}
    path = write(tmp_path, [eu_west(files, prometheus=prometheus)])
    with pytest.raises(EnvError) as refused:
        clusters_file_load(str(path))
    assert f"clusters[0] (eu-west).prometheus.ca_file: cannot read {missing}" in str(refused.value)


def test_not_yaml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "clusters.yaml"
    path.write_text("clusters:\n  - name: [eu-west\n")
    with pytest.raises(EnvError, match=r"is not YAML at line \d"):
        clusters_file_load(str(path))


def test_every_further_cluster_is_served_with_its_own_access(tmp_path: Path, files) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "password").write_text("east-pass\n")
    east = eu_west(
        files,
        name="us-east",
        colour="#2ca02c",
        context="us-east-admin",
        prometheus={
            "url": "https://prom-us.example.com",
            "username": "portal",
            "password_file": str(tmp_path / "password"),
            "cluster_label": "cluster",
        },
    )
    path = write(tmp_path, [eu_west(files), east])
    shown = (
        "from django.conf import settings as s; print(s.CLUSTER_NAME, list(s.OTHER_CLUSTERS)); "
        "o = s.OTHER_CLUSTERS['us-east']; p = o.prometheus; "
        "print(o.context, o.colour, o.pool_label_key, p.url, p.username, p.password, "
        "p.cluster_label, p.cluster_value)"
    )
    result = run_django(
        ["shell", "-v", "0", "-c", shown], {**PRODUCTION_ENV, "CLUSTERS_FILE": str(path)}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "eu-west ['us-east']",
        "us-east-admin #2ca02c example.com/pool https://prom-us.example.com portal east-pass "
        "cluster us-east",
    ]


def test_a_process_without_api_access_needs_no_kubeconfig_and_reaches_no_cluster(  # type: ignore[no-untyped-def]
    tmp_path: Path, files
) -> None:
    """The chart's web pods mount no credentials: with KUBE_API_ACCESS=false they start on
    the same file without its kubeconfigs, and have no API server in any cluster."""
    east = eu_west(files, name="us-east", kubeconfig=str(tmp_path / "not-mounted"))
    first = eu_west(files, kubeconfig=str(tmp_path / "not-mounted-either"))
    path = write(tmp_path, [first, east])
    shown = (
        "from pools.core.cluster_scope import cluster_scope; "
        "from pools.kube.client import kube_configured; print(kube_configured()); "
        "exec('with cluster_scope(\"us-east\"): print(kube_configured())')"
    )
    env = {**PRODUCTION_ENV, "CLUSTERS_FILE": str(path), "KUBE_API_ACCESS": "false"}
    result = run_django(["shell", "-v", "0", "-c", shown], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]
    # Without it, the start looks for the kubeconfig and names the entry.
    refused = run_django(["check"], {**env, "KUBE_API_ACCESS": "true"})
    assert "clusters[0] (eu-west).kubeconfig: cannot read" in refused.stderr


def test_a_further_clusters_unreadable_secret_stops_the_start(tmp_path: Path, files) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty").write_text("")
    prometheus = {
        "url": "https://p.example.com",
        "username": "u",
        "password_file": str(tmp_path / "empty"),
    }
    path = write(tmp_path, [eu_west(files), eu_west(files, name="us-east", prometheus=prometheus)])
    with pytest.raises(EnvError) as refused:
        cluster_settings(str(path), without_cluster_variables())
    assert f"clusters[1] (us-east).prometheus.password_file: {tmp_path / 'empty'} is empty" in str(
        refused.value
    )


SHOW_SCOPE = (
    "from django.conf import settings as s; "
    "print(s.CLUSTER_NAME, s.PROMETHEUS_CLUSTER_LABEL, s.PROMETHEUS_CLUSTER_VALUE)"
)


@pytest.mark.parametrize(
    ("querier", "expected"),
    [
        ({"cluster_label": "cluster"}, ["eu-west", "cluster", "eu-west"]),
        (
            {"cluster_label": "k8s_cluster", "cluster_value": "prod-eu-1"},
            ["eu-west", "k8s_cluster", "prod-eu-1"],
        ),
    ],
)
def test_a_shared_queriers_label_from_the_file(  # type: ignore[no-untyped-def]
    tmp_path: Path, files, querier: dict[str, str], expected: list[str]
) -> None:
    entry = eu_west(files, prometheus={"url": "http://thanos:9090", **querier})
    path = write(tmp_path, [entry])
    env = {**PRODUCTION_ENV, **without_cluster_variables(), "CLUSTERS_FILE": str(path)}
    result = run_django(["shell", "-v", "0", "-c", SHOW_SCOPE], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == expected


def test_a_shared_queriers_label_from_the_variables() -> None:
    env = {**PRODUCTION_ENV, **without_cluster_variables(), "CLUSTER_NAME": "us-east"}
    shown = run_django(
        ["shell", "-v", "0", "-c", SHOW_SCOPE], {**env, "PROMETHEUS_CLUSTER_LABEL": "cluster"}
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["us-east", "cluster", "us-east"]
    unset = run_django(["shell", "-v", "0", "-c", SHOW_SCOPE], env)
    assert unset.stdout.split() == ["us-east"]  # no label: the queries go as written
    bad = run_django(["check"], {**env, "PROMETHEUS_CLUSTER_LABEL": "k8s-cluster"})
    assert bad.returncode != 0
    assert "PROMETHEUS_CLUSTER_LABEL: expected a Prometheus label name" in bad.stderr
    alone = run_django(["check"], {**env, "PROMETHEUS_CLUSTER_VALUE": "prod-eu-1"})
    assert alone.returncode != 0
    assert "PROMETHEUS_CLUSTER_VALUE: needs PROMETHEUS_CLUSTER_LABEL" in alone.stderr


def test_the_cluster_described_twice_is_refused(tmp_path: Path, files) -> None:  # type: ignore[no-untyped-def]
    path = write(tmp_path, [eu_west(files)])
    environ = {**without_cluster_variables(), "KUBECONFIG": str(files["kubeconfig"])}
    with pytest.raises(EnvError, match="described by CLUSTERS_FILE and by KUBECONFIG"):
        cluster_settings(str(path), environ)


def test_without_a_file_the_variables_describe_the_one_cluster() -> None:
    env = {**PRODUCTION_ENV, **without_cluster_variables(), "CLUSTER_NAME": "gpu-eu"}
    env.pop("CLUSTERS_FILE", None)
    shown = "from django.conf import settings as s; print(s.CLUSTER_NAME, s.CLUSTERS_FILE == '')"
    result = run_django(["shell", "-v", "0", "-c", shown], {**env, "CLUSTERS_FILE": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["gpu-eu", "True"]
    bad = run_django(["check"], {**env, "CLUSTER_NAME": "GPU_eu"})
    assert bad.returncode != 0 and "CLUSTER_NAME: expected a DNS label" in bad.stderr
    assert "CLUSTERS_FILE" not in os.environ  # the suite itself runs without one
