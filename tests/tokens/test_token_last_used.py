"""A token's last use is recorded without a write a request: its first use at once, then
every token a process saw, in one statement at most once a minute (pools.tokens.LastUses)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.models import ApiToken
from pools.tokens import LastUses, token_authenticate, token_create
from tests.moves_helpers import user_in


def updates(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]


@pytest.mark.django_db
def test_a_first_use_is_written_at_once_and_later_ones_not_each_time() -> None:
    user = user_in("viewers", "script-owner")
    tokens = [token_create(user=user, name=f"script-{i}")[1] for i in range(50)]
    with CaptureQueriesContext(connection) as first_uses:
        for raw in tokens:
            token_authenticate(raw)
    assert len(updates(first_uses)) == 50
    assert not ApiToken.objects.filter(last_used_at__isnull=True).exists()
    with CaptureQueriesContext(connection) as later_uses:
        for _ in range(3):
            for raw in tokens:
                token_authenticate(raw)
    assert updates(later_uses) == []  # within the minute: nothing written


@pytest.mark.django_db
def test_the_tokens_seen_are_written_together_each_with_its_own_last_use() -> None:
    user = user_in("viewers", "script-owner")
    made = [token_create(user=user, name=f"script-{i}") for i in range(30)]
    ApiToken.objects.update(last_used_at=None)
    uses = LastUses(every=timedelta(seconds=0.2))
    found = [ApiToken.objects.get(pk=token.pk) for token, _ in made]
    for token in found:  # first uses: one write each
        uses.record(token, token.created_at + timedelta(minutes=5))
    last = {token.pk: token.created_at + timedelta(minutes=10 + i) for i, token in enumerate(found)}
    with CaptureQueriesContext(connection) as within:
        for token in found:
            uses.record(token, last[token.pk])
    assert updates(within) == []
    time.sleep(0.25)
    with CaptureQueriesContext(connection) as due:
        uses.record(found[0], last[found[0].pk])
    assert len(updates(due)) == 1  # every token this process saw, in one statement
    stored = dict(ApiToken.objects.values_list("pk", "last_used_at"))
    assert stored == last
