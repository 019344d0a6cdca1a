"""Every endpoint and method, for every role: the status each one gets."""

from __future__ import annotations

import json

import pytest
import yaml
from django.utils import timezone

from pools import moves
from pools.models import Node, Pool
from pools.tokens import token_create, token_revoke
from tests.api.conftest import api
from tests.moves_helpers import user_in
from tests.servers import RedisServer

ANON, VIEWER, REQUESTER, APPROVER, ADMIN, REVOKED = (
    "anonymous",
    "viewers",
    "requesters",
    "approvers",
    "pool-admins",
    "revoked",
)
ROLES = [ANON, VIEWER, REQUESTER, APPROVER, ADMIN, REVOKED]
NEW_POOL = {"name": "batch", "display_name": "Batch", "labels": {"workload-type": "batch"}}


def expect(ok: int, *allowed: str) -> dict[str, int]:
    """`ok` for the allowed roles, 403 for the others, 401 without valid credentials."""
    statuses = {role: (ok if role in allowed else 403) for role in ROLES}
    statuses[ANON] = statuses[REVOKED] = 401
    return statuses


EVERYONE = (VIEWER, REQUESTER, APPROVER, ADMIN)
MATRIX = [
    ("GET", "/api/v1/pools/", None, expect(200, *EVERYONE)),
    ("GET", "/api/v1/pools/training/", None, expect(200, *EVERYONE)),
    ("POST", "/api/v1/pools/", NEW_POOL, expect(201, ADMIN)),
    ("PATCH", "/api/v1/pools/shared/", {"min_nodes": 1}, expect(200, ADMIN)),
    (
        "PUT",
        "/api/v1/pools/shared/",
        {"name": "shared", "display_name": "Shared"},
        expect(200, ADMIN),
    ),
    ("DELETE", "/api/v1/pools/shared/", None, expect(204, ADMIN)),
    ("GET", "/api/v1/pools/?retired=true", None, expect(200, *EVERYONE)),
    ("POST", "/api/v1/pools/old/restore/", None, expect(200, ADMIN)),
    ("GET", "/api/v1/summary/", None, expect(200, *EVERYONE)),
    ("GET", "/api/v1/nodes/", None, expect(200, *EVERYONE)),
    ("GET", "/api/v1/nodes/n-free/", None, expect(200, *EVERYONE)),
    ("GET", "/api/v1/moves/", None, expect(200, *EVERYONE)),
    ("GET", "/api/v1/moves/{pending}/", None, expect(200, *EVERYONE)),
    (
        "POST",
        "/api/v1/moves/",
        {"nodes": ["n-free"], "destination": "shared", "reason": "r"},
        expect(201, REQUESTER, ADMIN),
    ),
    (
        "POST",
        "/api/v1/moves/dry-run/",
        {"nodes": ["n-free"], "destination": "shared"},
        expect(200, REQUESTER, ADMIN),
    ),
    ("POST", "/api/v1/moves/{pending}/approve/", {}, expect(200, APPROVER, ADMIN)),
    ("POST", "/api/v1/moves/{pending}/reject/", {"reason": "no"}, expect(200, APPROVER, ADMIN)),
    # Cancelling is the requester's own right (or a pool admin's): the role opens the door,
    # the service checks ownership, so another requester gets 403 too.
    ("POST", "/api/v1/moves/{pending}/cancel/", {}, expect(200, ADMIN)),
    ("POST", "/api/v1/moves/{own}/cancel/", {}, expect(200, REQUESTER, ADMIN)),
    ("GET", "/api/v1/audit-events/", None, expect(200, *EVERYONE)),
    ("POST", "/api/v1/inventory/sync/", None, expect(202, REQUESTER, ADMIN)),
    ("GET", "/api/v1/pools/mixed/insights/", None, expect(200, *EVERYONE)),
    ("GET", "/api/v1/profiles/", None, expect(200, *EVERYONE)),
    ("GET", "/api/v1/advice/", None, expect(200, *EVERYONE)),
    # No suggestion stands in this world: those allowed get told so (400).
    (
        "POST",
        "/api/v1/advice/dismiss/",
        {"key": "lend:a+b", "reason": "r"},
        expect(400, REQUESTER, ADMIN),
    ),
    ("GET", "/api/v1/drills/", None, expect(200, *EVERYONE)),
    (
        "POST",
        "/api/v1/drills/",
        {"kind": "node_joins", "pool": "mixed", "hold_seconds": 3600},
        expect(201, ADMIN),
    ),
    ("GET", "/api/schema/", None, expect(200, *EVERYONE)),
]


@pytest.fixture
def world(db, redis: RedisServer) -> dict[str, str]:  # type: ignore[no-untyped-def]
    now = timezone.now()
    Pool.objects.create(name="old", display_name="Old", retired_at=now)
    mixed = Pool.objects.get(name="mixed")
    for name in ("n-free", "n-pending", "n-own"):
        Node.objects.create(
            name=name,
            pool=mixed,
            pool_label="mixed",
            gpu_count=8,
            gpu_allocatable=8,
            labels={"gpu-pool": "mixed"},
            last_seen=now,
        )
    other = user_in("requesters", "someone-else")
    pending = moves.move_request_create(
        requested_by=other,
        node_names=["n-pending"],
        destination=Pool.objects.get(name="shared"),
        reason="matrix",
        now=now,
    )
    me = user_in(REQUESTER, "matrix-requesters")
    own = moves.move_request_create(
        requested_by=me,
        node_names=["n-own"],
        destination=Pool.objects.get(name="shared"),
        reason="mine",
        now=now,
    )
    return {"pending": str(pending.pk), "own": str(own.pk)}


def credentials(role: str) -> str | None:
    if role == ANON:
        return None
    if role == REVOKED:
        token, raw = token_create(user=user_in(ADMIN, "revoked-admin"), name="old")
        token_revoke(user=token.user, token_id=token.pk)
        return raw
    return token_create(user=user_in(role, f"matrix-{role}"), name="matrix")[1]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    ("method", "path", "body", "statuses"), MATRIX, ids=[f"{m} {p}" for m, p, _, _ in MATRIX]
)
def test_permission_matrix(
    world: dict[str, str], role: str, method: str, path: str, body: object, statuses: dict[str, int]
) -> None:
    client = api(credentials(role))
    response = client.generic(
        method,
        path.format(**world),
        json.dumps(body) if body is not None else "",
        content_type="application/json",
    )
    assert response.status_code == statuses[role], response.content[:300]
    if response.status_code >= 400:
        # The schema endpoint renders its errors as YAML, like the schema itself.
        body = yaml.safe_load(response.content)
        assert set(body["error"]) == {"code", "message", "fields"}
