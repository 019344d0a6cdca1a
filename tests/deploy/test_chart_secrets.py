"""Secrets reach the pods by secretKeyRef only: never a ConfigMap, never an env literal."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deploy.chart import (
    RELEASE,
    all_on_docs,
    containers,
    default_docs,
    named,
    of_kind,
    render,
    render_error,
)

SECRET_SETTINGS = {
    "DJANGO_SECRET_KEY",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "METRICS_TOKEN",
    "OIDC_RP_CLIENT_SECRET",
}
# A name that says "secret", or a URL that carries a user name and password.
SECRET_NAME = re.compile(
    r"SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|PRIVATE|API_KEY|ACCESS_KEY", re.IGNORECASE
)
# Names that match the pattern but hold no secret: the provider's token endpoint is a URL.
NOT_SECRET = {"OIDC_OP_TOKEN_ENDPOINT"}
CREDENTIALS_IN_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s@]*:[^/\s@]+@", re.IGNORECASE)


def strings_outside_secret_refs(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "secretKeyRef":
                continue
            yield from strings_outside_secret_refs(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from strings_outside_secret_refs(item, f"{path}[{index}]")
    elif isinstance(node, str):
        yield path, node


def looks_secret(name: str) -> bool:
    return name not in NOT_SECRET and bool(SECRET_NAME.search(name))


def leaks(docs: tuple[dict[str, Any], ...]) -> list[str]:
    found = []
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] == "Secret":
            found.append(f"{where}: the chart must not create Secrets")
        for path, text in strings_outside_secret_refs(doc):
            if CREDENTIALS_IN_URL.search(text):
                found.append(f"{where}{path}: a URL with credentials")
        if doc["kind"] == "ConfigMap":
            found += [f"{where}: {key}" for key in doc["data"] if looks_secret(key)]
    for where, container in containers(docs):
        for item in container.get("env", []):
            if looks_secret(item["name"]) and "value" in item:
                found.append(f"{where}: {item['name']} is a literal")
    return found


def test_the_leak_detector_finds_each_kind_of_leak() -> None:
    planted = (
        {"kind": "Secret", "metadata": {"name": "s"}},
        {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"METRICS_TOKEN": "abc"}},
        {
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "env": [
                                    {"name": "DJANGO_SECRET_KEY", "value": "k"},
                                    {"name": "CACHE_URL", "value": "redis://:hunter2@redis:6379"},
                                ],
                            }
                        ]
                    }
                }
            },
        },
    )
    assert len(leaks(planted)) == 4


@pytest.mark.parametrize(
    "render_docs",
    [
        default_docs,
        all_on_docs,
        lambda: render(sets=("metrics.enabled=false",)),
    ],
    ids=["default", "all-on", "metrics-off"],
)
def test_no_secret_appears_outside_a_secret_key_ref(render_docs) -> None:  # type: ignore[no-untyped-def]
    assert leaks(render_docs()) == []


def secret_refs(container: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        item["name"]: item["valueFrom"]["secretKeyRef"]
        for item in container["env"]
        if "secretKeyRef" in item.get("valueFrom", {})
    }


def test_every_container_reads_each_secret_from_the_secret_named_in_values() -> None:
    for where, container in containers(all_on_docs()):
        refs = secret_refs(container)
        assert set(refs) >= SECRET_SETTINGS, where
        assert refs["DATABASE_URL"] == {"name": "portal-db-app", "key": "uri"}, where
        assert refs["CELERY_BROKER_URL"] == {"name": "portal-redis", "key": "broker-url"}, where
        assert refs["CACHE_URL"] == {"name": "portal-redis", "key": "cache-url"}, where
        assert refs["DJANGO_SECRET_KEY"] == {
            "name": "gpu-pool-portal",
            "key": "DJANGO_SECRET_KEY",
        }, where
        assert refs["METRICS_TOKEN"] == {"name": "gpu-pool-portal", "key": "METRICS_TOKEN"}, where


def test_optional_secrets_are_read_only_when_their_feature_is_on() -> None:
    for where, container in containers(default_docs()):
        assert "OIDC_RP_CLIENT_SECRET" not in secret_refs(container), where
        assert "METRICS_TOKEN" in secret_refs(container), where
    for where, container in containers(render(sets=("metrics.enabled=false",))):
        assert "METRICS_TOKEN" not in secret_refs(container), where


def test_no_config_map_holds_a_secret_setting() -> None:
    for docs in (default_docs(), all_on_docs()):
        for config_map in of_kind(docs, "ConfigMap"):
            assert not SECRET_SETTINGS & set(config_map["data"]), config_map["metadata"]["name"]


def test_a_secret_reference_without_a_name_is_refused_naming_it() -> None:
    message = render_error(sets=("secrets.databaseUrl.name=",))
    assert "secrets" in message and "databaseUrl" in message


def test_the_config_map_is_the_one_the_pods_read() -> None:
    docs = default_docs()
    config = named(docs, "ConfigMap", f"{RELEASE}-gpu-pool-portal")
    for where, container in containers(docs):
        if where.startswith("Job/"):
            continue
        assert container["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
