import signal
import threading
from argparse import ArgumentParser

from django.core.management.base import BaseCommand, CommandError

from pools.common.cluster_access import current_cluster, served_clusters
from pools.core.cluster_scope import cluster_scope
from pools.inventory.watch import watch_inventory
from portal.metrics_process import metrics_process_start


class Command(BaseCommand):
    help = (
        "Keep the inventory current: list the cluster's nodes and pods once, then follow "
        "a WATCH (one writer a cluster, by a lease in the database). Stops on SIGTERM."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--cluster",
            default="",
            help="the cluster to watch, one watcher each (default: the portal's own)",
        )

    def handle(self, *args: object, **options: object) -> None:
        cluster = str(options["cluster"] or current_cluster())
        if cluster not in served_clusters():
            raise CommandError(f"no cluster named {cluster!r} is served here")
        metrics_process_start(what=f"inventory watcher of {cluster}")
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        with cluster_scope(cluster):
            watch_inventory(stop)
