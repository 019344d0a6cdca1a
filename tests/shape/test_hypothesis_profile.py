"""Property tests run under the project's Hypothesis profile: no per-example deadline and
no "too slow" health check, which a loaded machine would fail however correct the code; a
fixed number of examples, the same ones on every run (CI tries what a run here tried)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hypothesis_profile import HYPOTHESIS_MAX_EXAMPLES, HYPOTHESIS_PROFILE


def test_the_projects_profile_is_loaded() -> None:
    profile, current = settings.get_profile(HYPOTHESIS_PROFILE), settings()
    for chosen in (profile, current):
        assert chosen.deadline is None
        assert HealthCheck.too_slow in chosen.suppress_health_check
        assert chosen.max_examples == HYPOTHESIS_MAX_EXAMPLES
        assert chosen.derandomize
        assert chosen.database is None  # nothing remembered from an earlier run either


@given(st.integers())
def test_a_property_runs_under_it(value: int) -> None:
    assert settings().deadline is None
    assert isinstance(value, int)


def test_a_property_tries_the_same_examples_on_every_run() -> None:
    runs: list[list[int]] = [[], []]
    for seen in runs:

        @given(st.integers())
        def property_of(value: int) -> None:
            seen.append(value)  # noqa: B023 -- each run fills its own list, at once

        property_of()
    assert runs[0] == runs[1]
    assert len(set(runs[0])) > 1
