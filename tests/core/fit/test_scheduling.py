"""Taints against tolerations and nodes against required affinity, as Kubernetes matches them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pools.core.fit.scheduling import (
    NodePlacement,
    Requirement,
    Term,
    Toleration,
    tolerated,
    untolerated_taint,
)
from pools.core.taints import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint

TRAINING = Taint("workload-training", "true", NO_SCHEDULE)


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerates"),
    [
        (Toleration("workload-training", "Equal", "true", NO_SCHEDULE), TRAINING, True),
        (Toleration("workload-training", "", "true", NO_SCHEDULE), TRAINING, True),  # "" is Equal
        (Toleration("workload-training", "Equal", "True", NO_SCHEDULE), TRAINING, False),
        (Toleration("workload-training", "Equal", "", NO_SCHEDULE), TRAINING, False),
        (Toleration("workload-training", "Exists", "", NO_SCHEDULE), TRAINING, True),
        (Toleration("workload-training", "Exists", "", ""), TRAINING, True),  # every effect
        (Toleration("workload-training", "Exists", "", NO_EXECUTE), TRAINING, False),
        (Toleration("workload-inference", "Exists", "", NO_SCHEDULE), TRAINING, False),
        (Toleration("", "Exists", "", ""), TRAINING, True),
        (Toleration("", "Exists", "", NO_SCHEDULE), TRAINING, True),
        (Toleration("", "Exists", "", NO_EXECUTE), TRAINING, False),
        # The API refuses an empty key without Exists, but the matcher compares values.
        (Toleration("", "Equal", "true", ""), TRAINING, True),
        (Toleration("", "Equal", "false", ""), TRAINING, False),
        (Toleration("workload-training", "In", "true", NO_SCHEDULE), TRAINING, False),
        (Toleration("workload-training", "Gt", "0", NO_SCHEDULE), TRAINING, False),
        (Toleration("a", "Equal", "", ""), Taint("a", "", PREFER_NO_SCHEDULE), True),
    ],
)
def test_toleration_matches_as_kubernetes_does(
    toleration: Toleration, taint: Taint, tolerates: bool
) -> None:
    assert toleration.tolerates(taint) is tolerates


keys = st.sampled_from(["a", "b", "example.com/c", "node.kubernetes.io/not-ready"])
values = st.sampled_from(["", "true", "false", "1"])
effects = st.sampled_from([NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE])
taints = st.builds(Taint, keys, values, effects)
tolerations = st.builds(
    Toleration,
    st.one_of(st.just(""), keys),
    st.sampled_from(["", "Equal", "Exists"]),
    values,
    st.one_of(st.just(""), effects),
)


@given(taints)
def test_empty_key_exists_tolerates_every_taint(taint: Taint) -> None:
    assert Toleration("", "Exists").tolerates(taint)


@given(taints)
def test_a_toleration_written_from_a_taint_tolerates_it(taint: Taint) -> None:
    assert Toleration(taint.key, "Equal", taint.value, taint.effect).tolerates(taint)
    assert Toleration(taint.key, "Exists", "", taint.effect).tolerates(taint)


@given(tolerations, taints)
def test_a_set_effect_or_key_only_matches_itself(toleration: Toleration, taint: Taint) -> None:
    if toleration.tolerates(taint):
        assert toleration.effect in ("", taint.effect)
        assert toleration.key in ("", taint.key)
        assert toleration.operator == "Exists" or toleration.value == taint.value


@given(tolerations, taints, st.sampled_from(["", "true", "x"]))
def test_exists_ignores_the_value(toleration: Toleration, taint: Taint, value: str) -> None:
    exists = Toleration(toleration.key, "Exists", "", toleration.effect)
    assert exists.tolerates(taint) == exists.tolerates(Taint(taint.key, value, taint.effect))


@given(st.lists(taints, max_size=4), st.lists(tolerations, max_size=3))
def test_untolerated_taint_is_the_first_blocking_one_nobody_tolerates(
    node_taints: list[Taint], pod_tolerations: list[Toleration]
) -> None:
    found = untolerated_taint(node_taints, pod_tolerations)
    blocking = [
        t
        for t in node_taints
        if t.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(pod_tolerations, t)
    ]
    assert found == (blocking[0] if blocking else None)


def test_prefer_no_schedule_never_blocks() -> None:
    assert untolerated_taint([Taint("a", "", PREFER_NO_SCHEDULE)], []) is None


LABELS = {"gpu-pool": "training", "nvidia.com/gpu.count": "8", "zone": "a", "weird": "+5"}


@pytest.mark.parametrize(
    ("requirement", "matches"),
    [
        (Requirement("gpu-pool", "In", ("training", "mixed")), True),
        (Requirement("gpu-pool", "In", ("inference",)), False),
        (Requirement("missing", "In", ("x",)), False),
        (Requirement("gpu-pool", "NotIn", ("inference",)), True),
        (Requirement("gpu-pool", "NotIn", ("training",)), False),
        (Requirement("missing", "NotIn", ("x",)), True),  # absent label: NotIn matches
        (Requirement("gpu-pool", "Exists"), True),
        (Requirement("missing", "Exists"), False),
        (Requirement("missing", "DoesNotExist"), True),
        (Requirement("gpu-pool", "DoesNotExist"), False),
        (Requirement("nvidia.com/gpu.count", "Gt", ("4",)), True),
        (Requirement("nvidia.com/gpu.count", "Gt", ("8",)), False),
        (Requirement("nvidia.com/gpu.count", "Lt", ("9",)), True),
        (Requirement("nvidia.com/gpu.count", "Lt", ("-1",)), False),
        (Requirement("weird", "Gt", ("4",)), True),  # Go's ParseInt takes a sign
        (Requirement("zone", "Gt", ("0",)), False),  # not an integer: no match
        (Requirement("missing", "Lt", ("100",)), False),
    ],
)
def test_requirement(requirement: Requirement, matches: bool) -> None:
    assert requirement.parse_error == ""
    assert Term((requirement,)).matches(LABELS, "n1") is matches


@pytest.mark.parametrize(
    "requirement",
    [
        Requirement("gpu-pool", "In", ()),
        Requirement("gpu-pool", "NotIn", ()),
        Requirement("gpu-pool", "Exists", ("x",)),
        Requirement("nvidia.com/gpu.count", "Gt", ("4", "5")),
        Requirement("nvidia.com/gpu.count", "Gt", ("four",)),
        Requirement("nvidia.com/gpu.count", "Lt", ("1_000",)),  # Python's int() would take it
        Requirement("nvidia.com/gpu.count", "Gt", ("99999999999999999999",)),
        Requirement("gpu-pool", "Equals", ("training",)),
        Requirement("bad key!", "Exists"),
        Requirement("gpu-pool", "In", ("not a value",)),
    ],
)
def test_a_requirement_the_scheduler_cannot_parse_fails_its_term(requirement: Requirement) -> None:
    assert requirement.parse_error
    term = Term((Requirement("gpu-pool", "Exists"), requirement))
    assert not term.matches(LABELS, "n1")
    # ... but only its term: the terms are ORed.
    placement = NodePlacement((), (term, Term((Requirement("zone", "In", ("a",)),))))
    assert placement.matches(LABELS, "n1")


def test_terms_are_ored_and_expressions_anded() -> None:
    training = Requirement("gpu-pool", "In", ("training",))
    zone_b = Requirement("zone", "In", ("b",))
    assert not NodePlacement((), (Term((training, zone_b)),)).matches(LABELS)
    assert NodePlacement((), (Term((zone_b,)), Term((training,)))).matches(LABELS)


def test_an_empty_term_or_no_term_matches_nothing() -> None:
    assert not NodePlacement((), (Term(),)).matches(LABELS)
    assert not NodePlacement((), ()).matches(LABELS)
    assert NodePlacement((), None).matches(LABELS)


def test_node_selector_and_affinity_must_both_match() -> None:
    affinity = (Term((Requirement("gpu-pool", "Exists"),)),)
    assert NodePlacement((("zone", "a"),), affinity).matches(LABELS)
    assert not NodePlacement((("zone", "b"),), affinity).matches(LABELS)
    assert not NodePlacement((("missing", ""),), None).matches(LABELS)  # must be present


def test_match_fields_compare_the_node_name() -> None:
    pinned = Term(fields=(Requirement("metadata.name", "In", ("n1",)),))
    not_n1 = Term(fields=(Requirement("metadata.name", "NotIn", ("n1",)),))
    assert pinned.matches({}, "n1") and not pinned.matches({}, "n2")
    assert not not_n1.matches({}, "n1") and not_n1.matches({}, "n2")
    assert not Term(fields=(Requirement("metadata.name", "In", ("n1", "n2")),)).matches({}, "n1")
    assert not Term(fields=(Requirement("metadata.labels", "In", ("n1",)),)).matches({}, "n1")


def test_named_nodes_is_the_prefilter_of_pinned_terms() -> None:
    def by_name(*names: str) -> Term:
        return Term(fields=(Requirement("metadata.name", "In", names[:1]),))

    assert NodePlacement((), (by_name("a"), by_name("b"))).named_nodes() == {"a", "b"}
    # One term without a name pin and every node is a candidate.
    anywhere = Term((Requirement("gpu-pool", "Exists"),))
    assert NodePlacement((), (by_name("a"), anywhere)).named_nodes() is None
    # Pins in one term intersect.
    both = Term(
        fields=(
            Requirement("metadata.name", "In", ("a",)),
            Requirement("metadata.name", "In", ("b",)),
        )
    )
    assert NodePlacement((), (both,)).named_nodes() == frozenset()


def test_requires_value_reads_what_every_matching_node_must_carry() -> None:
    in_training = Term((Requirement("gpu-pool", "In", ("training", "mixed")),))
    only_mixed = Term((Requirement("gpu-pool", "In", ("mixed",)),))
    assert NodePlacement((), (in_training,)).requires_value("gpu-pool") == {"training", "mixed"}
    assert NodePlacement((("gpu-pool", "mixed"),), (in_training,)).requires_value("gpu-pool") == {
        "mixed"
    }
    assert NodePlacement((), (in_training, only_mixed)).requires_value("gpu-pool") == {
        "training",
        "mixed",
    }
    exists = Term((Requirement("gpu-pool", "Exists"),))
    assert NodePlacement((), (in_training, exists)).requires_value("gpu-pool") is None
    assert NodePlacement().requires_value("gpu-pool") is None
