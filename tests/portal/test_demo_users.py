from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command

from pools.common.roles import Capability, capabilities


@pytest.mark.django_db
def test_demo_users_are_created_once_with_printed_passwords() -> None:
    out = StringIO()
    call_command("demo_users", stdout=out)
    lines = [line.split() for line in out.getvalue().splitlines()[1:]]
    passwords = {name: password for name, _role, password in lines}
    assert set(passwords) == {"admin", "requester", "approver", "viewer", "pooladmin"}
    approver = authenticate(username="approver", password=passwords["approver"])
    assert approver is not None
    assert capabilities(approver) == {Capability.VIEW, Capability.APPROVE_MOVE}
    assert User.objects.get(username="admin").is_superuser

    again = StringIO()
    call_command("demo_users", stdout=again)
    assert "exist already" in again.getvalue()
    assert authenticate(username="approver", password=passwords["approver"]) is not None
