"""The portal's tests. Imported before any test module (tests/conftest.py is
`tests.conftest`), so the Hypothesis profile below holds for every property test."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Timing-free: Hypothesis's default 200 ms deadline per example and its "too slow" health
# check measure the machine's load, not the code. HYPOTHESIS_PROFILE picks another.
HYPOTHESIS_PROFILE = "portal"
settings.register_profile(
    HYPOTHESIS_PROFILE, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", HYPOTHESIS_PROFILE))
