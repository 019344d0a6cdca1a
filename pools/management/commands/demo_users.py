"""Create the demo users (one per role) with random passwords, printed once."""

from __future__ import annotations

import secrets

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from django.db import transaction

from pools.common.roles import Role

DEMO_USERS: list[tuple[str, Role | None]] = [
    ("admin", None),  # superuser
    ("requester", Role.REQUESTER),
    ("approver", Role.APPROVER),
    ("viewer", Role.VIEWER),
    ("pooladmin", Role.POOL_ADMIN),
]


class Command(BaseCommand):
    help = "Create the demo users (admin, requester, approver, viewer, pooladmin) if missing."

    @transaction.atomic
    def handle(self, *args: object, **options: object) -> None:
        created = []
        for username, role in DEMO_USERS:
            if User.objects.filter(username=username).exists():
                continue
            password = secrets.token_urlsafe(12)
            if role is None:
                User.objects.create_superuser(username, password=password)
            else:
                user = User.objects.create_user(username, password=password)
                user.groups.add(Group.objects.get_or_create(name=role.value)[0])
            created.append((username, role.value if role else "superuser", password))
        if not created:
            self.stdout.write(
                "Demo users exist already (passwords were printed when they were created; "
                "reset one with: .venv/bin/python manage.py changepassword NAME)."
            )
            return
        self.stdout.write("Demo users (these passwords are shown only now):")
        for username, role, password in created:
            self.stdout.write(f"  {username:<10} {role:<12} {password}")
