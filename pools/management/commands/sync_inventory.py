from argparse import ArgumentParser

from django.core.management.base import BaseCommand, CommandError

from pools.common.cluster_access import served_clusters
from pools.core.cluster_scope import cluster_scope
from pools.inventory import inventory_sync
from pools.kube.errors import KubeError


class Command(BaseCommand):
    help = "List a cluster's GPU nodes and pods now and update the inventory (each cluster's)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--cluster", default="", help="only this cluster (default: every one)")

    def handle(self, *args: object, **options: object) -> None:
        clusters = [str(options["cluster"])] if options["cluster"] else list(served_clusters())
        for cluster in clusters:
            if cluster not in served_clusters():
                raise CommandError(f"no cluster named {cluster!r} is served here")
            with cluster_scope(cluster):
                try:
                    report = inventory_sync()
                except KubeError as exc:
                    raise CommandError(f"cluster {cluster}: {exc}") from exc
            self.stdout.write(f"Inventory synced: {report}")
