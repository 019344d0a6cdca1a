from __future__ import annotations

import pytest

from tests.real_cluster import RealCluster


@pytest.fixture
def real(real_cluster_session: RealCluster) -> RealCluster:
    """The real control plane, in the demo scenario's state."""
    real_cluster_session.reset()
    return real_cluster_session
