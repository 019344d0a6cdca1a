"""What an entry of CLUSTERS_FILE may say: a well-formed file read whole, and each malformed
entry refused naming the entry and the field, every problem at once."""

from __future__ import annotations

from typing import Any

import pytest

from pools.core.clusters import DEFAULT_COLOUR, ClusterConfig, MetricsAccess, clusters_read


def entry(**fields: Any) -> dict[str, Any]:
    return {"name": "eu-west", "kubeconfig": "/etc/portal/eu-west.kubeconfig", **fields}


def test_a_well_formed_file_is_read_whole() -> None:
    clusters, problems = clusters_read(
        {
            "clusters": [
                entry(
                    colour="#1f77b4",
                    context="eu-west-admin",
                    pool_label_key="example.com/pool",
                    prometheus={
                        "url": "https://prom-eu.example.com/prom",
                        "username": "portal",
                        "password_file": "/run/secrets/prom-eu",
                        "ca_file": "/etc/ssl/eu.pem",
                        "headers": {"X-Scope-OrgID": "eu"},
                    },
                ),
                {
                    "name": "us-east",
                    "in_cluster": True,
                    "prometheus": {"url": "http://thanos:9090", "cluster_label": "cluster"},
                },
            ]
        }
    )
    assert problems == []
    eu, us = clusters
    assert eu == ClusterConfig(
        "eu-west",
        "#1f77b4",
        "/etc/portal/eu-west.kubeconfig",
        "eu-west-admin",
        False,
        MetricsAccess(
            url="https://prom-eu.example.com/prom",
            username="portal",
            password_file="/run/secrets/prom-eu",
            ca_file="/etc/ssl/eu.pem",
            headers=(("X-Scope-OrgID", "eu"),),
        ),
        "example.com/pool",
    )
    assert eu.files() == [
        ("kubeconfig", "/etc/portal/eu-west.kubeconfig"),
        ("prometheus.password_file", "/run/secrets/prom-eu"),
        ("prometheus.ca_file", "/etc/ssl/eu.pem"),
    ]
    # A shared querier selects the cluster's series by its name unless told otherwise.
    assert us.in_cluster and us.kubeconfig == "" and us.colour == DEFAULT_COLOUR
    assert us.metrics is not None and us.metrics.shared
    assert (us.metrics.cluster_label, us.metrics.cluster_value) == ("cluster", "us-east")


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([], "CLUSTERS_FILE: expected a mapping with one key, `clusters`"),
        ({"clusters": []}, "clusters: expected a list of at least one cluster"),
        ({"clusters": ["eu-west"]}, "clusters[0]: expected a mapping"),
        ({"clusters": [{"kubeconfig": "/k"}]}, "clusters[0].name: required"),
        ({"clusters": [entry(name="EU_west")]}, "clusters[0] (EU_west).name: must be a DNS label"),
        ({"clusters": [{"name": "eu-west"}]}, "clusters[0] (eu-west).kubeconfig: required"),
        ({"clusters": [entry(colour="blue")]}, "(eu-west).colour: expected a colour"),
        ({"clusters": [entry(in_cluster="yes")]}, "(eu-west).in_cluster: expected true or false"),
        ({"clusters": [entry(in_cluster=True)]}, "(eu-west).kubeconfig: in_cluster uses"),
        ({"clusters": [entry(region="eu")]}, "(eu-west).region: unknown field"),
        ({"clusters": [entry(pool_label_key="bad key")]}, "(eu-west).pool_label_key: "),
        ({"clusters": [entry(prometheus="http://p")]}, "(eu-west).prometheus: expected a mapping"),
        (
            {"clusters": [entry(prometheus={"url": "ftp://p"})]},
            "(eu-west).prometheus.url: expected an http:// or https:// address",
        ),
        (
            {"clusters": [entry(prometheus={"url": "http://p", "bearer_token": "s3cret"})]},
            "(eu-west).prometheus.bearer_token: secrets come from files: use bearer_token_file",
        ),
        (
            {"clusters": [entry(prometheus={"url": "http://p", "password": "s3cret"})]},
            "(eu-west).prometheus.password: secrets come from files: use password_file",
        ),
        (
            {"clusters": [entry(prometheus={"url": "http://p", "username": "u"})]},
            "(eu-west).prometheus.password_file: username needs its password_file",
        ),
        (
            {"clusters": [entry(prometheus={"url": "http://p", "key_file": "/k"})]},
            "(eu-west).prometheus.cert_file: key_file needs its certificate",
        ),
        (
            {"clusters": [entry(prometheus={"url": "http://p", "cluster_label": "0x"})]},
            "(eu-west).prometheus.cluster_label: expected a Prometheus label name",
        ),
        (
            {"clusters": [entry(prometheus={"url": "http://p", "cluster_value": "eu"})]},
            "(eu-west).prometheus.cluster_label: cluster_value needs its cluster_label",
        ),
        (
            {"clusters": [entry(prometheus={"url": "http://p", "headers": {"X Bad": "v"}})]},
            "(eu-west).prometheus.headers.X Bad: not a header name",
        ),
        ({"clusters": [entry(), entry()]}, "clusters: the name 'eu-west' is given to 2 clusters"),
        (
            {
                "clusters": [
                    {"name": "a", "in_cluster": True},
                    {"name": "b", "in_cluster": True},
                ]
            },
            "clusters: only one cluster is the one the portal runs in",
        ),
    ],
)
def test_a_malformed_entry_is_named_with_its_field(document: Any, expected: str) -> None:
    clusters, problems = clusters_read(document)
    assert clusters == []
    assert any(expected in p for p in problems), problems


def test_every_problem_is_said_at_once_and_no_cluster_is_kept() -> None:
    clusters, problems = clusters_read(
        {"clusters": [entry(colour="red"), {"name": "us-east"}, entry(name="ap-south")]}
    )
    assert clusters == []
    assert problems == [
        "clusters[0] (eu-west).colour: expected a colour like #1f77b4",
        "clusters[1] (us-east).kubeconfig: required (or in_cluster: true for the portal's own)",
    ]
