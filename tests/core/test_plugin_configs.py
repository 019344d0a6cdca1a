"""The device plugin's sharing configurations: the setting read strictly, a node's problem
with one, and GFD's labels read as the configuration applied."""

from __future__ import annotations

import pytest

from pools.core.plugin_configs import (
    PluginConfig,
    PluginConfigsError,
    advertised,
    parse_plugin_configs,
    plugin_config_problem,
)

KNOWN = parse_plugin_configs("default=whole, time-sliced-4=time-slicing:4, mps-2=mps:2")


def test_the_setting_lists_names_with_their_sharing() -> None:
    assert {
        "default": PluginConfig("default"),
        "time-sliced-4": PluginConfig("time-sliced-4", "time-slicing", 4),
        "mps-2": PluginConfig("mps-2", "mps", 2),
    } == KNOWN
    assert parse_plugin_configs("") == {}
    assert KNOWN["time-sliced-4"].label == "time-sliced-4 (time-slicing, 4 per GPU)"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a=time-slicing:1", "at least 2 replicas"),
        ("a=spatial:4", "expected whole, or time-slicing or mps"),
        ("a", "expected name=whole"),
        ("bad name=whole", "expected name=whole"),
        ("a=whole,a=mps:2", "a is listed twice"),
    ],
)
def test_a_malformed_entry_is_refused_naming_it(text: str, words: str) -> None:
    with pytest.raises(PluginConfigsError, match=words):
        parse_plugin_configs(text)


def test_a_node_with_mig_instances_or_an_unlisted_name_is_refused() -> None:
    assert plugin_config_problem("time-sliced-4", known=KNOWN, layouts=("whole",)) is None
    unlisted = plugin_config_problem("tesla-t4", known=KNOWN, layouts=("whole",))
    assert unlisted is not None and "not a device plugin configuration listed" in unlisted
    assert "default, mps-2, time-sliced-4" in unlisted
    mig = plugin_config_problem("mps-2", known=KNOWN, layouts=("mig-1g.10gb",))
    assert mig is not None and "all-disabled first" in mig


def test_gfds_labels_say_when_the_sharing_is_advertised() -> None:
    shared = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    assert advertised(KNOWN["time-sliced-4"], shared)
    assert not advertised(KNOWN["mps-2"], shared)
    assert not advertised(KNOWN["default"], shared)
    assert advertised(KNOWN["default"], {})
    assert advertised(
        KNOWN["default"],
        {"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none"},
    )
