"""The fixes written once and spliced per pool: the same text as writing each whole, and work
that does not grow with the pool count or the workload count (issue 25, R1)."""

from __future__ import annotations

import copy
import difflib
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pools.core.fit import check, fix, fix_text, text_diff, workloads
from pools.core.fit.check import check_fit
from pools.core.fit.cluster import FitPool
from pools.core.fit.findings import ManifestError
from pools.core.fit.fix import merge_scheduling_block, scheduling_fixes
from pools.core.fit.fix_text import Dumping, ManifestText, yaml_text
from pools.core.fit.text_diff import unified_diff
from pools.core.fit.workloads import Manifest, read_manifest
from pools.core.taints import Taint
from tests.core.fit.builders import POOL_KEY, POOLS, node, snapshot

LONG = "a setting " * 12  # past the width of 100 at any indentation


def reference(manifest: Manifest, pool: FitPool) -> tuple[str, str, list[str]]:
    """A pool's fix as it was written before the splice: the whole manifest copied, fixed,
    and written again by PyYAML (libyaml's emitter), then diffed."""
    options: dict[str, Any] = {
        "Dumper": yaml.CSafeDumper,
        "sort_keys": False,
        "default_flow_style": False,
        "allow_unicode": True,
        "width": 100,
    }
    documents = copy.deepcopy(list(manifest.documents))
    changed = []
    for workload in manifest.workloads:
        for template in workload.templates:
            spec: Any = documents[workload.document - 1]
            for step in template.location:
                spec = spec[step]
            if merge_scheduling_block(spec, pool, POOL_KEY):
                changed.append(f"document {workload.document}: {template.path}")
    before = yaml.dump_all([d for d in manifest.documents if d is not None], **options)
    after = yaml.dump_all([d for d in documents if d is not None], **options)
    return after, unified_diff(before, after, "submitted", f"fixed for pool {pool.name}"), changed


def assert_as_written_whole(text: str) -> None:
    manifest = read_manifest(text)
    fixes = scheduling_fixes(manifest, POOLS, POOL_KEY)
    for pool in POOLS:
        after, diff, changed = reference(manifest, pool)
        assert fixes[pool.name].text == after
        assert fixes[pool.name].diff == diff
        assert list(fixes[pool.name].changed) == changed


def deployment(name: str, spec: str) -> str:
    body = "\n".join("        " + line for line in spec.strip("\n").splitlines())
    return (
        f"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {{name: {name}}}\n"
        f"  spec:\n    replicas: 2\n    template:\n      spec:\n{body}\n"
    )


CONTAINER = "containers: [{name: m, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]"
SPECS = {
    "bare": CONTAINER,
    "other pool": f"""
{CONTAINER}
nodeSelector: {{gpu-pool: inference, other: "{LONG}"}}
tolerations: [{{key: a, operator: Exists, effect: "NoSchedule"}}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{{key: gpu-pool, operator: In, values: [training, inference]}}]
      - matchExpressions: [{{key: zone, operator: NotIn, values: ["{LONG}"]}}]
      - matchFields: [{{key: metadata.name, operator: In, values: [n1]}}]
    preferredDuringSchedulingIgnoredDuringExecution: []
""",
    "empty and null": f"""
{CONTAINER}
affinity: {{}}
tolerations: null
""",
    "empty lists": f"""
tolerations: []
affinity:
  nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: []}}}}
{CONTAINER}
""",
    "scalars of every kind": f"""
{CONTAINER}
hostname: "multi\\n\\nline  \\n  with spaces"
subdomain: "ünïcode ☃ {LONG}"
priorityClassName: "'quoted'"
schedulerName: "yes"
serviceAccountName: "1.0"
runtimeClassName: ""
tolerations: [{{key: "{LONG}", operator: Exists}}, {{key: b, operator: Equal, value: "null"}}]
""",
    "pinned by nodeSelector": f"""
nodeSelector: {{gpu-pool: training}}
{CONTAINER}
""",
}


@pytest.mark.parametrize("case", SPECS, ids=list(SPECS))
def test_every_fix_is_the_text_of_the_whole_manifest_written_again(case: str) -> None:
    items = "".join(deployment(f"d{n}", SPECS[case]) for n in range(3))
    assert_as_written_whole(f"apiVersion: v1\nkind: List\nitems:\n{items}")


def test_several_documents_and_kinds_are_written_as_a_whole() -> None:
    documents = [
        f"apiVersion: v1\nkind: List\nitems:\n{deployment('a', SPECS['other pool'])}",
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  {CONTAINER}\n",
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
        "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: r}\nspec:\n"
        "  headGroupSpec: {template: {spec: {containers: [{name: h, image: i}]}}}\n"
        "  workerGroupSpecs:\n  - {groupName: g, replicas: 2, template: {spec: {"
        + CONTAINER
        + ", affinity: null}}}\n",
    ]
    assert_as_written_whole("---\n".join(documents))


def test_a_manifest_with_aliases_is_written_whole_as_before() -> None:
    text = f"""apiVersion: v1
kind: List
items:
{deployment("a", "tolerations: &t [{key: a, operator: Exists}]" + chr(10) + CONTAINER)}
{deployment("b", "tolerations: *t" + chr(10) + CONTAINER)}"""
    manifest = read_manifest(text)
    assert ManifestText.of(manifest, Dumping()) is None
    assert_as_written_whole(text)


SCALARS = st.one_of(
    st.text(max_size=130),
    st.sampled_from(["", "yes", "null", "1.0", "- x", "a: b", "#", "'", LONG, "x\n\ny", " "]),
    st.integers(),
    st.booleans(),
    st.none(),
)
KEYS = st.sampled_from(["a", "b", "key", "values", "ünï", LONG[:40], "- k"])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=12,
)
TERMS = st.lists(
    st.fixed_dictionaries(
        {
            "matchExpressions": st.lists(
                st.fixed_dictionaries(
                    {
                        "key": st.sampled_from([POOL_KEY, "zone", LONG]),
                        "operator": st.sampled_from(["In", "NotIn"]),
                        "values": st.lists(st.sampled_from(["training", "a", LONG]), max_size=3),
                    }
                ),
                max_size=3,
            )
        }
    ),
    max_size=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    extra=st.dictionaries(st.sampled_from(["x-notes", "x-more"]), VALUES),
    terms=TERMS,
    tolerations=st.lists(
        st.fixed_dictionaries({"key": st.sampled_from(["a", LONG]), "operator": st.just("Exists")}),
        max_size=2,
    ),
    selector=st.dictionaries(st.sampled_from([POOL_KEY, "zone"]), st.sampled_from(["a", LONG])),
    copies=st.integers(1, 3),
)
def test_any_manifest_is_spliced_to_the_text_of_writing_it_whole(  # type: ignore[no-untyped-def]
    extra, terms, tolerations, selector, copies
):
    spec: dict[str, Any] = {
        "containers": [{"name": "m", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        **extra,
    }
    if terms:
        required = {"nodeSelectorTerms": terms}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    if tolerations:
        spec["tolerations"] = tolerations
    if selector:
        spec["nodeSelector"] = selector
    items = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"d{n}"},
         "spec": {"template": {"spec": spec}}}
        for n in range(copies)
    ]  # fmt: skip
    assert_as_written_whole(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))


@settings(max_examples=60, deadline=None)
@given(documents=st.lists(VALUES, min_size=1, max_size=3), width=st.integers(10, 120))
def test_yaml_text_is_pyyamls_text(documents: list[Any], width: int) -> None:
    expected = yaml.dump_all(
        documents,
        Dumper=yaml.CSafeDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=width,
    )
    assert yaml_text(documents, width) == expected


def many_deployments(count: int) -> str:
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        deployment(f"serve-{n}", CONTAINER) for n in range(count)
    )


@pytest.mark.parametrize("pools", [1, 3])
@pytest.mark.parametrize("count", [10, 100])
def test_the_manifest_is_serialised_once_whatever_the_pool_and_workload_counts(
    monkeypatch: pytest.MonkeyPatch, pools: int, count: int
) -> None:
    # Each pool's fix was the whole manifest deep-copied and written again (issue 25, R1).
    monkeypatch.setattr(fix, "serialise", None)  # the way that writes it whole: not taken
    monkeypatch.setattr(fix.copy, "deepcopy", None)
    dump = Dumping()
    fixes = scheduling_fixes(
        read_manifest(many_deployments(count)), POOLS[:pools], POOL_KEY, dump=dump
    )
    assert len(fixes) == pools
    # The skeleton once; then per pool its affinity and its toleration, each written once
    # for all the Deployments (the mixed pool has no taint, so no toleration).
    assert dump.calls <= 1 + 2 * pools


class CountingMatcher(difflib.SequenceMatcher):  # type: ignore[type-arg]
    made = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        CountingMatcher.made += 1


@pytest.mark.parametrize("terms", [500, 2000])
def test_repeated_stretches_are_matched_once(monkeypatch: pytest.MonkeyPatch, terms: int) -> None:
    monkeypatch.setattr(difflib, "SequenceMatcher", CountingMatcher)
    CountingMatcher.made = 0
    lines = ["spec:\n"] + [
        f"- matchExpressions:\n  - key: zone\n    values:\n    - zone-{n}\n" for n in range(terms)
    ]
    old = "".join(lines)
    new = old.replace("    - zone", "  - key: pool\n    - zone")
    diff = unified_diff(old, new, "a", "b")
    assert diff.count("\n+  - key: pool") == terms
    assert CountingMatcher.made <= 3  # not one per term


@given(
    old=st.lists(st.sampled_from(["a\n", "b\n", "c\n", "u1\n", "u2\n", "u3\n"]), max_size=80),
    new=st.lists(st.sampled_from(["a\n", "b\n", "c\n", "u1\n", "u2\n", "u3\n"]), max_size=80),
)
def test_the_memo_of_stretches_changes_no_opcode(old: list[str], new: list[str]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_diff, "SHORT_LINES", 6)
        memoised = text_diff.line_opcodes(old, new)
        patch.setattr(
            text_diff,
            "_stretch_once",
            lambda o, n, i1, i2, j1, j2, seen: text_diff._stretch(o, n, i1, i2, j1, j2),
        )
        assert text_diff.line_opcodes(old, new) == memoised


def test_a_list_of_one_shape_runs_the_filters_once(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[Any] = []
    verdicts: list[Any] = []

    class CountingRun(check.FilterRun):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            runs.append(self)

    real_verdict = check._verdict
    monkeypatch.setattr(check, "FilterRun", CountingRun)
    monkeypatch.setattr(check, "_verdict", lambda *a: verdicts.append(a) or real_verdict(*a))
    cluster = snapshot(node("t1", "training", gpus=8), node("i1", "inference", gpus=8))
    report = check_fit(read_manifest(many_deployments(40)), cluster, pool_key=POOL_KEY)
    assert len(report.workloads) == 40
    assert len(runs) == 1
    assert len(verdicts) == 1 + len(POOLS)  # the cluster's, then each pool's


def test_the_fix_shares_no_list_between_terms() -> None:
    # A list shared by two terms was written as a YAML anchor and aliases (`values: *id001`).
    pool = FitPool("training", {}, Taint("workload-training", "true"))
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]} for z in "ab"]
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    }
    merge_scheduling_block(spec, pool, POOL_KEY)
    assert "&id" not in yaml_text([spec])
    assert fix_text.MARK not in yaml_text([spec])


class Reference(yaml.SafeLoader):
    """PyYAML's own constructor, with the fit check's resolvers (dates stay strings)."""


Reference.yaml_implicit_resolvers = workloads._Loader.yaml_implicit_resolvers


@pytest.mark.parametrize(
    "text",
    [
        "a: [1, 1.5, .inf, ~, yes, no, true, 0x1F, '1', \"x\\ty\", 2001-12-14]\nb: {c: {d: []}}\n",
        "a: &x {b: 1}\nc: *x\n",  # an alias: the same object twice, as SafeConstructor gives
        "base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n",  # a merge key
        "a: !!binary aGVsbG8=\nt: !!timestamp 2001-12-14\ns: !!set {a}\n",
        "= : 1\na: 1\na: 2\n",
        "---\n---\na: 1\n...\n",
    ],
)
def test_the_one_pass_build_gives_safe_constructors_documents(text: str) -> None:
    built = list(yaml.load_all(text, Loader=workloads._Loader))
    expected = list(yaml.load_all(text, Loader=Reference))
    assert repr(built) == repr(expected)
    if "*x" in text:
        assert built[0]["a"] is built[0]["c"]


def distinct_deployments(count: int, *, copies: int = 1) -> str:
    """`count` Deployments asking for different CPU, each `copies` times."""
    items = "".join(
        deployment(
            f"d{n}-{c}",
            f"containers: [{{name: m, image: i, resources: {{requests: {{cpu: {n + 1}m}}}}}}]",
        )
        for n in range(count)
        for c in range(copies)
    )
    return f"apiVersion: v1\nkind: List\nitems:\n{items}"


def test_more_different_pod_templates_than_the_limit_are_refused_naming_the_first_past_it() -> None:
    # Each different template is filtered against every node: 1,250 of them (333 KB) took
    # 3.8 s of CPU. Identical ones cost one, so they count once.
    read_manifest(distinct_deployments(workloads.MAX_POD_SHAPES, copies=3))
    with pytest.raises(ManifestError) as refused:
        read_manifest(distinct_deployments(workloads.MAX_POD_SHAPES + 1))
    [problem] = refused.value.as_list()
    assert problem["document"] == 1
    assert problem["field"] == f"items[{workloads.MAX_POD_SHAPES}].spec.template.spec"
    assert problem["object"] == f"Deployment d{workloads.MAX_POD_SHAPES}-0"
    assert f"at most {workloads.MAX_POD_SHAPES} different" in problem["message"]
