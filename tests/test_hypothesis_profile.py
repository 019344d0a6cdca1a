"""Property tests run under the project's Hypothesis profile: no per-example deadline and
no "too slow" health check, which a loaded machine would fail however correct the code."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import HYPOTHESIS_PROFILE


def test_the_projects_profile_is_loaded() -> None:
    current = settings()
    assert settings.get_profile(HYPOTHESIS_PROFILE).deadline is None
    assert current.deadline is None
    assert HealthCheck.too_slow in current.suppress_health_check


@given(st.integers())
def test_a_property_runs_under_it(value: int) -> None:
    assert settings().deadline is None
    assert isinstance(value, int)
