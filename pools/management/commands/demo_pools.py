"""Create the demo's own pool beside the default ones: MIG inference, for the showcase
scenario's A100s split into 1g.10gb instances (kubesim/scenarios/showcase.yaml); and turn
on a reclaim policy for the inference pool, where the scenario's embedders hold GPUs and sit
idle: the demo shows reclaim candidates."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from pools.fleet.services import pool_save
from pools.models import Pool, ReclaimPolicy

MIG_POOL = {
    "name": "mig-inference",
    "display_name": "MIG inference",
    "description": "Small models served on MIG instances: A100s split into 1g.10gb slices, "
    "asked for as nvidia.com/mig-1g.10gb. Tainted so whole-GPU pods stay out.",
    "labels": {"workload-type": "mig-inference"},
    "taint_key": "workload-mig-inference",
    "taint_value": "true",
    "taint_effect": "NoSchedule",
    "accepted_gpu_layouts": ["mig-1g.10gb"],
}


class Command(BaseCommand):
    help = "Create the demo's MIG inference pool and inference's reclaim policy if missing."

    def handle(self, *args: object, **options: object) -> None:
        inference = Pool.objects.filter(name="inference").first()
        if inference is not None and not ReclaimPolicy.objects.filter(pool=inference).exists():
            ReclaimPolicy.objects.create(
                pool=inference, enabled=True, below_percent=5, for_hours=1, grace_hours=4
            )
            self.stdout.write("Turned on a reclaim policy for the inference pool.")
        if Pool.objects.filter(name=MIG_POOL["name"]).exists():
            return
        saved = pool_save(pool=Pool(**MIG_POOL))
        self.stdout.write(f"Created the pool {saved.pool.display_name}.")
