"""kubesim's pure parts: patch semantics and validation messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.errors import ApiError
from kubesim.patching import json_merge_patch, json_patch, strategic_merge_patch
from kubesim.selectors import label_selector
from kubesim.validation import label_value_problems, qualified_name_problems, validate_taints

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    st.dictionaries(st.text(max_size=3), json_values, max_size=4),
    st.dictionaries(st.text(max_size=3), json_values, max_size=4),
)
def test_merge_patch_is_idempotent(target: dict, patch: dict) -> None:  # type: ignore[type-arg]
    once = json_merge_patch(target, patch)
    assert json_merge_patch(once, patch) == once


def test_strategic_merge_merges_conditions_by_type_but_replaces_taints() -> None:
    node = {
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "DiskPressure", "status": "False"},
            ]
        },
    }
    patched = strategic_merge_patch(
        node,
        {
            "spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        },
        "Node",
    )
    assert patched["spec"]["taints"] == [{"key": "b", "effect": "NoSchedule"}]
    assert patched["status"]["conditions"] == [
        {"type": "Ready", "status": "False"},
        {"type": "DiskPressure", "status": "False"},
    ]
    assert node["spec"]["taints"] == [{"key": "a", "effect": "NoSchedule"}]  # not mutated


def test_strategic_merge_directives() -> None:
    node = {
        "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
        "status": {"conditions": [{"type": "Ready"}, {"type": "Gone"}]},
    }
    patched = strategic_merge_patch(
        node,
        {
            "metadata": {
                "labels": {"$patch": "replace", "c": "3"},
                "finalizers": ["y"],
                "$setElementOrder/finalizers": ["x", "y"],
            },
            "status": {"conditions": [{"type": "Gone", "$patch": "delete"}]},
        },
        "Node",
    )
    assert patched["metadata"]["labels"] == {"c": "3"}
    assert patched["metadata"]["finalizers"] == ["x", "y"]
    assert patched["status"]["conditions"] == [{"type": "Ready"}]


def test_json_patch_operations_and_errors() -> None:
    doc = {"metadata": {"labels": {"a/b": "1"}}, "spec": {"taints": [{"key": "t"}]}}
    result = json_patch(
        doc,
        [
            {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"},
            {"op": "add", "path": "/spec/taints/-", "value": {"key": "u"}},
            {"op": "copy", "from": "/metadata/labels/a~1b", "path": "/metadata/labels/c"},
            {"op": "move", "from": "/spec/taints/0", "path": "/spec/first"},
            {"op": "test", "path": "/spec/first/key", "value": "t"},
        ],
    )
    assert result == {
        "metadata": {"labels": {"a/b": "2", "c": "2"}},
        "spec": {"taints": [{"key": "u"}], "first": {"key": "t"}},
    }
    # Whatever jsonpatch's Apply refuses, the server answers in the same words (K11).
    for refused in (
        {"op": "remove", "path": "/metadata/labels/nope"},
        {"op": "test", "path": "/metadata/labels/a~1b", "value": "2"},
        {"op": "add", "path": "metadata/labels/x", "value": "y"},
        {"op": "bogus", "path": "/metadata"},
    ):
        with pytest.raises(ApiError) as caught:
            json_patch(doc, [refused])
        assert caught.value.status() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the server rejected our request due to an error in our request",
            "reason": "Invalid",
            "details": {},
            "code": 422,
        }
    with pytest.raises(ApiError) as caught:
        json_patch(doc, ["x"])
    assert (caught.value.code, caught.value.message) == (
        400,
        "error decoding patch: json: cannot unmarshal string into Go value of type "
        "handlers.jsonPatchOp",
    )
    with pytest.raises(ApiError) as caught:
        json_patch(doc, {"op": "add"}, validation="Ignore")
    assert caught.value.message == (
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    )


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("gpu-pool", None),
        ("nvidia.com/gpu.product", None),
        ("a" * 63, None),
        ("a" * 64, "name part must be no more than 63 characters"),
        ("-bad", "name part must consist of alphanumeric characters"),
        ("Example.com/x", "prefix part a lowercase RFC 1123 subdomain"),
        ("a/b/c", "a qualified name must consist of"),
        ("/x", "prefix part must be non-empty"),
        ("x/", "name part must be non-empty"),
    ],
)
def test_label_key_rules(key: str, problem: str | None) -> None:
    problems = qualified_name_problems(key)
    if problem is None:
        assert problems == []
    else:
        assert problems and problems[0].startswith(problem)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("", True),
        ("true", True),
        ("a.b_c-d", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("x!", False),
        ("-x", False),
    ],
)
def test_label_value_rules(value: str, ok: bool) -> None:
    assert (label_value_problems(value) == []) is ok


def test_taints_unique_by_key_and_effect() -> None:
    same_key_other_effect = [
        {"key": "k", "effect": "NoSchedule"},
        {"key": "k", "effect": "NoExecute"},
    ]
    assert validate_taints(same_key_other_effect, "spec.taints") == []
    errors = validate_taints(
        [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}],
        "spec.taints",
    )
    assert [e.field for e in errors] == ["spec.taints[1]"]
    assert errors[0].message.endswith("taints must be unique by key and effect pair")
    missing = validate_taints([{"key": "k"}], "spec.taints")
    assert [(e.field, e.reason) for e in missing] == [
        ("spec.taints[0].effect", "FieldValueRequired")
    ]


def test_label_selector_parse_errors_are_bad_requests() -> None:
    with pytest.raises(ApiError) as caught:
        label_selector("a in b")
    assert caught.value.code == 400
    assert label_selector("a in (x, y),!b")({"metadata": {"labels": {"a": "y"}}})
