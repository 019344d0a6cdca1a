from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from pools.kube.errors import KubeError
from pools.moves.break_glass import BreakGlassRefused, node_assign


class Command(BaseCommand):
    help = (
        "Break-glass: put one node in a pool now, outside the move workflow (a pool admin's "
        "step, recorded in the audit log as such). --dry-run prints the change only."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("node")
        parser.add_argument("pool")
        parser.add_argument(
            "--user", required=True, help="the pool admin taking the step (for the audit log)"
        )
        parser.add_argument("--dry-run", action="store_true", help="print the change, send none")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = node_assign(
                node_name=options["node"],
                pool_name=options["pool"],
                username=options["user"],
                dry_run=options["dry_run"],
            )
        except (BreakGlassRefused, KubeError) as exc:
            raise CommandError(str(exc)) from exc
        if done.diff.is_empty:
            self.stdout.write(f"{done.node} is already in pool {done.pool}: nothing to change.")
            return
        verb = "would change" if options["dry_run"] else "changed"
        self.stdout.write(f"{done.node} → {done.pool}: {verb} {done.diff.summary()}")
