"""Injecting a GPU fault: an XID on one GPU of a node, as the DCGM exporter reports it.

Only the cluster simulator (kubesim) accepts an injected XID, on its control endpoint
`/kubesim/gpus` beside the API server, with the same credentials; a real cluster answers
404 and the drill says so. (On real hardware the equivalent is DCGM's own field injection,
`dcgmi test --inject`, run on the node: nothing the portal can reach.)"""

from __future__ import annotations

from django.conf import settings

from pools.kube.client import api_client
from pools.kube.errors import KubeRefused
from pools.kube.retry import RetryPolicy

FAULT_PATH = "/kubesim/gpus"


def _post(body: dict[str, object], doing: str) -> None:
    def call() -> None:
        api = api_client()
        # The client's own request building: the kubeconfig's token and TLS, as for any call.
        request = api.param_serialize(
            "POST",
            FAULT_PATH,
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(*request, _request_timeout=settings.KUBE_TIMEOUT)
        response.read()
        api.response_deserialize(response, {"200": "object"})  # raises ApiException on >= 300

    try:
        RetryPolicy().call(call, doing=doing)
    except KubeRefused as exc:
        if exc.status == 404:
            raise KubeRefused(
                f"{doing}: this API server takes no injected GPU faults (only the cluster "
                "simulator does)",
                status=404,
                reason=exc.reason,
            ) from exc
        raise


def gpu_xid_inject(node: str, gpu: int, xid: int) -> None:
    """GPU `gpu` of `node` reports XID `xid` from now on (setting it again is harmless)."""
    _post({"node": node, "gpu": gpu, "xid": xid}, f"injecting XID {xid} on {node} GPU {gpu}")


def gpu_xid_clear(node: str, gpu: int) -> None:
    """The injected XID is gone: the GPU reports what it would without it. An API server
    without the fault endpoint took no fault either: nothing to clear."""
    try:
        _post({"node": node, "gpu": gpu, "xid": None}, f"clearing the XID on {node} GPU {gpu}")
    except KubeRefused as exc:
        if exc.status != 404:
            raise
