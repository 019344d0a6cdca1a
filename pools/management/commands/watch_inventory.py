import signal
import threading

from django.core.management.base import BaseCommand

from pools.inventory.watch import watch_inventory
from portal.metrics_process import metrics_process_start


class Command(BaseCommand):
    help = (
        "Keep the inventory current: list the cluster's nodes and pods once, then follow "
        "a WATCH (one writer at a time, by a lease in the database). Stops on SIGTERM."
    )

    def handle(self, *args: object, **options: object) -> None:
        metrics_process_start(what="inventory watcher")
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        watch_inventory(stop)
