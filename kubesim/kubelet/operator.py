"""What the GPU operator installs that the portal sees: its namespace, the device plugin's
and dcgm-exporter's service accounts and DaemonSets. The real DaemonSet controller makes
one pod per GPU node, the real scheduler binds it, and these kubelets run it."""

from __future__ import annotations

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.daemonsets import NAMESPACE, OPERANDS, daemonset_object
from kubesim.kubelet.agent import Kubelet


def install_gpu_operator(api: client.ApiClient, kubelet: Kubelet) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    kubelet.ensure_namespace(NAMESPACE)
    for operand in OPERANDS:
        account = {"metadata": {"name": operand.name, "namespace": NAMESPACE}}
        daemonset = daemonset_object(operand, "")
        for field in ("status", "creationTimestamp", "generation"):
            daemonset.pop(field, None)
            daemonset["metadata"].pop(field, None)
        for create, body in (
            (core.create_namespaced_service_account, account),
            (apps.create_namespaced_daemon_set, daemonset),
        ):
            try:
                create(NAMESPACE, body)
            except ApiException as error:
                if error.status != 409:
                    raise
