"""Every pod at the `restricted` Pod Security level, with probes and resources set."""

from __future__ import annotations

import pytest

from tests.deploy.chart import all_on_docs, containers, default_docs, deployment, pod_specs

# The volume types the restricted Pod Security level allows.
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
RENDERS = pytest.mark.parametrize("render", [default_docs, all_on_docs], ids=["default", "all-on"])


@RENDERS
def test_every_pod_runs_as_a_numeric_non_root_user_with_runtime_default_seccomp(render) -> None:  # type: ignore[no-untyped-def]
    specs = list(pod_specs(render()))
    assert len(specs) == 5
    for where, spec in specs:
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True, where
        # A numeric UID: the kubelet cannot verify runAsNonRoot against a user name.
        assert isinstance(context["runAsUser"], int) and context["runAsUser"] > 0, where
        assert isinstance(context["runAsGroup"], int) and context["runAsGroup"] > 0, where
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
        for forbidden in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(forbidden), f"{where}: {forbidden}"
        # The restricted level allows only these volume types; the chart needs emptyDir,
        # extraVolumes may bring a ConfigMap or a Secret (a private CA).
        for volume in spec.get("volumes", []):
            (kind,) = set(volume) - {"name"}
            assert kind in RESTRICTED_VOLUMES, f"{where}: {volume}"


@RENDERS
def test_every_container_is_locked_down(render) -> None:  # type: ignore[no-untyped-def]
    found = list(containers(render()))
    assert len(found) == 5
    for where, container in found:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, where
        assert context["readOnlyRootFilesystem"] is True, where
        assert context["capabilities"] == {"drop": ["ALL"]}, where
        assert context["runAsNonRoot"] is True, where
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert not context.get("privileged"), where


@RENDERS
def test_every_container_has_requests_and_limits(render) -> None:  # type: ignore[no-untyped-def]
    for where, container in containers(render()):
        resources = container["resources"]
        for kind in ("requests", "limits"):
            assert set(resources[kind]) >= {"cpu", "memory"}, f"{where}: {kind}"


def mounted_paths(spec: dict, container: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    return {mount["mountPath"]: volumes[mount["name"]] for mount in container["volumeMounts"]}


def test_every_pod_writes_only_to_its_emptydirs() -> None:
    docs = default_docs()
    for where, spec in pod_specs(docs):
        for container in spec["containers"]:
            assert "emptyDir" in mounted_paths(spec, container)["/tmp"], where

    web = deployment(docs, "web")["spec"]["template"]["spec"]
    web_container = web["containers"][0]
    heartbeat = next(a for a in web_container["command"] if a.startswith("--worker-tmp-dir="))
    heartbeat_dir = heartbeat.split("=", 1)[1]
    assert mounted_paths(web, web_container)[heartbeat_dir]["emptyDir"]["medium"] == "Memory"
    # Gunicorn's control socket would go under $HOME, which is on the read-only root.
    assert "--no-control-socket" in web_container["command"]

    beat = deployment(docs, "beat")["spec"]["template"]["spec"]
    schedule = next(a for a in beat["containers"][0]["command"] if a.startswith("--schedule="))
    schedule_dir = schedule.split("=", 1)[1].rsplit("/", 1)[0]
    assert "emptyDir" in mounted_paths(beat, beat["containers"][0])[schedule_dir]


def test_the_web_pods_are_probed_on_healthz_and_readyz() -> None:
    web = deployment(default_docs(), "web")["spec"]["template"]["spec"]["containers"][0]
    assert web["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert web["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert web["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}


def test_the_pods_accept_the_host_header_probes_and_scrapes_send() -> None:
    # The kubelet and Prometheus address a pod by its IP; Django refuses any Host that is
    # not in DJANGO_ALLOWED_HOSTS, and the kubelet expands $(POD_IP) only from a variable
    # defined earlier in the list.
    for where, container in containers(default_docs()):
        names = [item["name"] for item in container["env"]]
        hosts = container["env"][names.index("DJANGO_ALLOWED_HOSTS")]["value"]
        assert "$(POD_IP)" in hosts.split(","), where
        pod_ip = container["env"][names.index("POD_IP")]
        assert names.index("POD_IP") < names.index("DJANGO_ALLOWED_HOSTS"), where
        assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", where
