"""Node label and taint keys a pool must not claim, because another component owns them (pure).

A pool's labels and taint are set on every node moved into it and removed from every node
moved out. A key that Kubernetes, the kubelet, GPU Feature Discovery, Node Feature Discovery
or the GPU Operator writes would be fought over: each move would strip the owner's label from
the nodes it moves, and every node whose owner wrote another value would show as drifted. A
value that names one host cannot be right on all of a pool's nodes. `owned_key_problem` and
`host_name_problem` are the one rule; the pool definition check (new and edited pools), the
readiness check and `manage.py check --deploy` (pools stored before the rule) all call them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Label prefixes Kubernetes reserves, and who writes under them. The most specific first;
# kubernetes.io and k8s.io and their subdomains belong to Kubernetes' own components.
_OWNED_DOMAINS = (
    ("feature.node.kubernetes.io", "Node Feature Discovery (the node's hardware features)"),
    ("nfd.node.kubernetes.io", "Node Feature Discovery"),
    ("node.kubernetes.io", "the kubelet and the node lifecycle controller (node conditions)"),
    ("node-role.kubernetes.io", "cluster installers such as kubeadm (the node's role)"),
    ("kubernetes.io", "Kubernetes and the kubelet (the kubernetes.io namespace is reserved)"),
    ("k8s.io", "Kubernetes (the k8s.io namespace is reserved)"),
)
# The one reserved prefix meant for administrators: the kubelet may not set these labels on
# its own node (NodeRestriction), so they are the safe place for a pool's isolation label.
_ADMIN_DOMAIN = "node-restriction.kubernetes.io"

# Names under nvidia.com/ that NVIDIA's components write on GPU nodes, by name prefix.
_NVIDIA_NAMES = (
    ("gpu-driver-upgrade", "the GPU Operator's driver upgrade controller"),
    ("gpu.deploy.", "the GPU Operator (which of its components run on the node)"),
    ("gpu.", "GPU Feature Discovery (the GPU's product, count, memory and family)"),
    ("mig.", "the GPU Operator's MIG manager and GPU Feature Discovery (the MIG layout)"),
    ("cuda.", "GPU Feature Discovery (the driver's CUDA version)"),
    ("gfd.", "GPU Feature Discovery"),
    ("device-plugin.", "the GPU Operator (the device plugin's configuration)"),
    ("vgpu.", "GPU Feature Discovery and the GPU Operator (vGPU)"),
    ("mps.", "GPU Feature Discovery (MPS sharing)"),
)

_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_CLOUD_HOST = re.compile(r"^ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(\..*)?$")  # EC2's node names
# Three labels or more, ending in a top-level domain: not a version such as 535.104.05.
_FQDN = re.compile(r"^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+\.[A-Za-z]{2,}$")


def key_owner(key: str) -> str | None:
    """Which component owns the label or taint `key`, or None when a pool may claim it."""
    prefix, slash, name = key.partition("/")
    if not slash:
        return None
    domain = prefix.lower()
    if domain == _ADMIN_DOMAIN or domain.endswith("." + _ADMIN_DOMAIN):
        return None
    for owned, owner in _OWNED_DOMAINS:
        if domain == owned or domain.endswith("." + owned):
            return owner
    if domain == "nvidia.com":
        for start, owner in _NVIDIA_NAMES:
            if name.startswith(start):
                return owner
    return None


def owned_key_problem(key: str) -> str | None:
    """Why a pool may not claim `key` as a label or taint key, or None."""
    owner = key_owner(key)
    if owner is None:
        return None
    return (
        f"owned by {owner}; a pool would remove it from every node it moves out and fight "
        f"its owner over it (use your own prefix, or {_ADMIN_DOMAIN}/)"
    )


def host_name_problem(value: str) -> str | None:
    """Why `value` looks like one host's name (an address, a cloud node name, a DNS name)."""
    if _IPV4.match(value) or _CLOUD_HOST.match(value) or _FQDN.match(value):
        return (
            "looks like a host name; a pool's labels are set on every node of the pool, so a "
            "value naming one host would be wrong on all the others"
        )
    return None


def ownership_problems(labels: Mapping[str, object], taint_key: str) -> dict[str, list[str]]:
    """What a pool's labels and taint claim that it must not, by field, each with why."""
    problems: dict[str, list[str]] = {}
    for key, value in labels.items():
        if problem := owned_key_problem(key):
            problems.setdefault("labels", []).append(f"Label key {key!r} is {problem}.")
        if isinstance(value, str) and (problem := host_name_problem(value)):
            problems.setdefault("labels", []).append(f"Label {key}={value!r} {problem}.")
    if taint_key and (problem := owned_key_problem(taint_key)):
        problems.setdefault("taint_key", []).append(f"Taint key {taint_key!r} is {problem}.")
    return problems
