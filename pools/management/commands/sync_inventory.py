from django.core.management.base import BaseCommand, CommandError

from pools.inventory import inventory_sync
from pools.kube.errors import KubeError


class Command(BaseCommand):
    help = "List the cluster's GPU nodes and pods now and update the inventory."

    def handle(self, *args: object, **options: object) -> None:
        try:
            report = inventory_sync()
        except KubeError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Inventory synced: {report}")
