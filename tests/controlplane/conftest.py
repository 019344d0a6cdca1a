from __future__ import annotations

import pytest

from tests.real_cluster import RealCluster


@pytest.fixture
def real(real_cluster_session: RealCluster) -> RealCluster:
    """The real control plane, in the demo scenario's state. A reset that fails twice skips
    the test with the kubelet's reason, as the `cluster` fixture does (a full run on
    2026-12-02 met such resets at the end of the real control plane's tests)."""
    try:
        real_cluster_session.reset()
    except RuntimeError as error:
        pytest.skip(f"the real cluster could not be put back to the scenario: {error}")
    return real_cluster_session
