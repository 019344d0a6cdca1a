"""What Kubernetes accepts as a label key, label value, taint and DNS label (pure).

The rules and limits follow apimachinery's validation package; the portal checks them before
anything reaches the API server, so a bad pool definition is refused with the field and the
reason instead of failing later on every node.
"""

from __future__ import annotations

import re

from pools.core.taints import TAINT_EFFECTS

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label (or taint) key, or None."""
    if key.count("/") > 1:
        return "may contain at most one '/' (an optional DNS subdomain prefix, then a name)"
    prefix, _, name = key.rpartition("/")
    if "/" in key:
        if not prefix:
            return "the prefix before '/' must not be empty"
        if len(prefix) > 253:
            return "the prefix before '/' must be at most 253 characters"
        if not _SUBDOMAIN.match(prefix):
            return (
                f"the prefix {prefix!r} must be a lowercase DNS subdomain "
                "(letters, digits, '-' and '.', starting and ending with a letter or digit)"
            )
    if not name:
        return "the name must not be empty"
    if len(name) > 63:
        return f"the name must be at most 63 characters (it has {len(name)})"
    if not _NAME.match(name):
        return (
            "the name must consist of letters, digits, '-', '_' or '.', and start and end "
            "with a letter or digit"
        )
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63:
        return f"must be at most 63 characters (it has {len(value)})"
    if not _VALUE.match(value):
        return (
            "must be empty or consist of letters, digits, '-', '_' or '.', and start and end "
            "with a letter or digit"
        )
    return None


def dns_label_problem(name: str) -> str | None:
    if len(name) > 63:
        return f"must be at most 63 characters (it has {len(name)})"
    if not _DNS_LABEL.match(name):
        return (
            "must be a DNS label: lowercase letters, digits and '-', starting and ending "
            "with a letter or digit"
        )
    return None


def taint_effect_problem(effect: str) -> str | None:
    if effect not in TAINT_EFFECTS:
        return f"must be one of {', '.join(TAINT_EFFECTS)} (got {effect!r})"
    return None
