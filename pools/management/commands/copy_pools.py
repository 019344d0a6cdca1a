from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from pools.common.cluster_access import served_clusters
from pools.fleet.services import pools_copy


class Command(BaseCommand):
    help = (
        "Give a cluster the active pools of another that it lacks, with the same definitions "
        "(a new cluster of the fleet starts with the pools the others have). Nodes are not "
        "touched: they join a pool through the move workflow."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("source", help="the cluster whose pools are copied")
        parser.add_argument("target", help="the cluster that gets them (one served here)")

    def handle(self, *args: Any, **options: Any) -> None:
        source, target = options["source"], options["target"]
        if target not in served_clusters():
            raise CommandError(f"no cluster named {target!r} is served here")
        try:
            made = pools_copy(source=source, target=target)
        except ValidationError as exc:
            raise CommandError(f"a pool of {source} cannot be made in {target}: {exc}") from exc
        names = ", ".join(p.name for p in made) or "none (it has them all)"
        self.stdout.write(f"Pools copied from {source} to {target}: {names}.")
