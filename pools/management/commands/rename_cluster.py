from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from pools.fleet.cluster_rename import RenameRefused, cluster_rename


class Command(BaseCommand):
    help = (
        "Carry the pools and nodes kept for a cluster over to its new name, after CLUSTER_NAME "
        "(or the CLUSTERS_FILE entry) changed. Audited events keep the name they were "
        "recorded under."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("old")
        parser.add_argument("new")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            pools, nodes = cluster_rename(old=options["old"], new=options["new"])
        except RenameRefused as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{options['old']} → {options['new']}: {pools} pools, {nodes} nodes.")
