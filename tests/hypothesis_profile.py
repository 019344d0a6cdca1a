"""The Hypothesis profile of every property test, loaded by tests/conftest.py before any
test module is collected. Not in tests/__init__.py: the servers the tests start import
`tests.settings`, and with it the package, and Hypothesis would add 0.15 s to each start."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Timing-free and the same on every run. Hypothesis's default 200 ms deadline per example
# and its "too slow" health check measure the machine's load, not the code; a fixed number
# of examples drawn from a seed per test (derandomize) makes a CI run try exactly the
# examples a run here tried. HYPOTHESIS_PROFILE picks another (`default` draws anew).
HYPOTHESIS_PROFILE = "portal"
HYPOTHESIS_MAX_EXAMPLES = 100
settings.register_profile(
    HYPOTHESIS_PROFILE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=HYPOTHESIS_MAX_EXAMPLES,
    derandomize=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", HYPOTHESIS_PROFILE))
