"""Injecting a GPU fault: an XID on one GPU of a node, as the DCGM exporter reports it.

Only the cluster simulator (kubesim) accepts an injected XID, on its control endpoint
`/kubesim/gpus` beside the API server, with the same credentials. A real cluster has no
such endpoint: kube-apiserver answers 404 to an account allowed every URL and 403 to any
other (the chart's account among them), and the drill is refused at once. (On real
hardware the equivalent is DCGM's own field injection, `dcgmi test --inject`, run on the
node: nothing the portal can reach.)"""

from __future__ import annotations

import contextlib

from django.conf import settings

from pools.kube.client import api_client
from pools.kube.errors import KubeError, KubeRefused
from pools.kube.retry import RetryPolicy

FAULT_PATH = "/kubesim/gpus"
# What an API server without the fault endpoint answers: 404, or 403 to an account that may
# not ask for URLs outside the API (kube-apiserver decides access before it looks the path up).
NO_FAULT_ENDPOINT = (403, 404)


class FaultsUnsupported(KubeRefused):
    """The cluster takes no injected GPU faults: it is not the cluster simulator, or the
    portal's account may not use the simulator's control endpoint."""


def no_faults_here(status: int) -> str:
    return (
        "this cluster cannot inject GPU faults: only the cluster simulator takes them, from "
        f"an account it allows (POST {FAULT_PATH} answered {status})"
    )


def _post(body: dict[str, object], doing: str, *, retry: bool = True) -> None:
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
        (RetryPolicy() if retry else RetryPolicy(attempts=1)).call(call, doing=doing)
    except KubeRefused as exc:
        if exc.status in NO_FAULT_ENDPOINT:
            raise FaultsUnsupported(
                f"{doing}: {no_faults_here(exc.status)}", status=exc.status, reason=exc.reason
            ) from exc
        raise


def gpu_faults_problem(node: str) -> str | None:
    """Why this cluster cannot take an injected fault on `node`, or None when it can (or
    cannot be asked now: the drill's start then says what failed). Asks the endpoint to
    change no GPU of the node, so nothing on the cluster changes."""
    try:
        _post({"node": node, "gpu": []}, f"asking whether {node} takes GPU faults", retry=False)
    except FaultsUnsupported as exc:
        return no_faults_here(exc.status)
    except KubeError:
        return None
    return None


def gpu_xid_inject(node: str, gpu: int, xid: int) -> None:
    """GPU `gpu` of `node` reports XID `xid` from now on (setting it again is harmless)."""
    _post({"node": node, "gpu": gpu, "xid": xid}, f"injecting XID {xid} on {node} GPU {gpu}")


def gpu_xid_clear(node: str, gpu: int) -> None:
    """The injected XID is gone: the GPU reports what it would without it. A cluster that
    takes no faults took none either: nothing to clear."""
    with contextlib.suppress(FaultsUnsupported):
        _post({"node": node, "gpu": gpu, "xid": None}, f"clearing the XID on {node} GPU {gpu}")
