"""Create or update a provider user: password, e-mail, and exactly the given groups."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--password")
        parser.add_argument("--email")
        parser.add_argument("--groups", default="", help="comma-separated; empty for none")

    def handle(self, *args: Any, **options: Any) -> None:
        user, _ = User.objects.get_or_create(username=options["username"])
        if options["password"]:
            user.set_password(options["password"])
        if options["email"] is not None:
            user.email = options["email"]
        user.save()
        names = [name for name in options["groups"].split(",") if name]
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in names])
