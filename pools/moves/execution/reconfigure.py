"""A reconfiguration's wait: after its PATCH set `nvidia.com/mig.config` (and the state
`pending`), the GPU operator's MIG manager repartitions the GPUs, restarts the device plugin
and sets `nvidia.com/mig.config.state` to `success` or `failed`. The node is read until the
state says which, or until RECONFIGURE_WAIT_SECONDS; its lease is renewed on every poll.

A device plugin configuration (`nvidia.com/device-plugin.config`) has no state label: the
plugin's config manager restarts the plugin with it, and GPU feature discovery relabels the
node with the replicas and sharing strategy it now advertises. The node is read until those
labels say the configuration's sharing, or until RECONFIGURE_WAIT_SECONDS.

On success the node is uncordoned by the caller and the inventory reads its new units. On
failure, or when the MIG manager (or the device plugin) never answered, the node stays
cordoned: GPUs half repartitioned must not take pods, nor pods be promised a share that is
not advertised. The failure says what to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings

from pools.audit import audit
from pools.common.errors import ReconfigurationFailed
from pools.core.plugin_configs import REPLICAS_LABEL, STRATEGY_LABEL, advertised
from pools.kube.nodes import Raw, read_node
from pools.models import MoveItem
from pools.moves.plan import MIG_CONFIG_LABEL, MIG_STATE_LABEL, PLUGIN_CONFIG_LABEL

SUCCESS, FAILED = "success", "failed"
WHAT_TO_DO = (
    "The node stays cordoned. Look at the MIG manager's log on it (kubectl logs -n "
    "gpu-operator -l app=nvidia-mig-manager) and the node's events; then ask for a "
    "configuration it can take, or set it back and uncordon the node by hand."
)


PLUGIN_WHAT_TO_DO = (
    "The node stays cordoned. Look at the device plugin's log on it (kubectl logs -n "
    "gpu-operator -l app=nvidia-device-plugin-daemonset -c config-manager) and check that "
    "its ConfigMap holds that configuration; then ask for one it has, or set the label back "
    "and uncordon the node by hand."
)


def plugin_config_applied(item: MoveItem, raw: Raw, *, renew: Callable[[], None]) -> Raw:
    """The node once GPU feature discovery labels it with the sharing of the device plugin
    configuration the move set; raises ReconfigurationFailed when it is not seen in time."""
    request, name = item.request, item.node.name
    wanted = settings.DEVICE_PLUGIN_CONFIGS.get(request.plugin_config)
    if wanted is None:
        raise ReconfigurationFailed(
            f"{request.plugin_config!r} is no longer listed in DEVICE_PLUGIN_CONFIGS: what it "
            f"should advertise is not known. {PLUGIN_WHAT_TO_DO}"
        )
    deadline = time.monotonic() + settings.RECONFIGURE_WAIT_SECONDS
    while True:
        labels = (raw.get("metadata") or {}).get("labels") or {}
        if labels.get(PLUGIN_CONFIG_LABEL) != wanted.name:
            raise ReconfigurationFailed(
                f"{name}'s {PLUGIN_CONFIG_LABEL} is {labels.get(PLUGIN_CONFIG_LABEL)!r}, not "
                f"{wanted.name!r}: someone changed it meanwhile. {PLUGIN_WHAT_TO_DO}"
            )
        if advertised(wanted, labels):
            audit(
                "node.reconfigured",
                request=request,
                node_name=name,
                message=f"the device plugin advertises {wanted.label}",
            )
            return raw
        if time.monotonic() >= deadline:
            seen = labels.get(REPLICAS_LABEL, "unset"), labels.get(STRATEGY_LABEL, "unset")
            raise ReconfigurationFailed(
                f"the device plugin did not advertise {wanted.label} on {name} within "
                f"{settings.RECONFIGURE_WAIT_SECONDS} s ({REPLICAS_LABEL}={seen[0]}, "
                f"{STRATEGY_LABEL}={seen[1]}). {PLUGIN_WHAT_TO_DO}"
            )
        renew()
        time.sleep(settings.DRAIN_POLL_SECONDS)
        raw = read_node(name)


def mig_config_applied(item: MoveItem, raw: Raw, *, renew: Callable[[], None]) -> Raw:
    """The node once its MIG manager applied the configuration the move set; raises
    ReconfigurationFailed when it failed or did not answer in time."""
    request, name = item.request, item.node.name
    wanted = request.mig_config
    deadline = time.monotonic() + settings.RECONFIGURE_WAIT_SECONDS
    while True:
        labels = (raw.get("metadata") or {}).get("labels") or {}
        state = labels.get(MIG_STATE_LABEL, "")
        if labels.get(MIG_CONFIG_LABEL) != wanted:
            raise ReconfigurationFailed(
                f"{name}'s {MIG_CONFIG_LABEL} is {labels.get(MIG_CONFIG_LABEL)!r}, not "
                f"{wanted!r}: someone changed it while the MIG manager worked. {WHAT_TO_DO}"
            )
        if state == SUCCESS:
            audit(
                "node.reconfigured",
                request=request,
                node_name=name,
                message=f"the MIG manager applied {wanted}",
            )
            return raw
        if state == FAILED:
            raise ReconfigurationFailed(
                f"the MIG manager could not apply {wanted} on {name} "
                f"({MIG_STATE_LABEL}={FAILED}). {WHAT_TO_DO}"
            )
        if time.monotonic() >= deadline:
            raise ReconfigurationFailed(
                f"the MIG manager did not apply {wanted} on {name} within "
                f"{settings.RECONFIGURE_WAIT_SECONDS} s ({MIG_STATE_LABEL}="
                f"{state or 'unset'}). {WHAT_TO_DO}"
            )
        renew()
        time.sleep(settings.DRAIN_POLL_SECONDS)
        raw = read_node(name)
