"""The demo's database in one process: the migrations, the demo users, the demo pools. One
Django start instead of three, while the demo starts its servers beside it."""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Migrate, then create the demo users and the demo pools if missing."

    def handle(self, *args: object, **options: object) -> None:
        call_command("migrate", interactive=False, verbosity=0, stdout=self.stdout)
        call_command("demo_users", stdout=self.stdout)
        call_command("demo_pools", stdout=self.stdout)
