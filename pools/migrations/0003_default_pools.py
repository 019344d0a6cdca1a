"""The default pools: training and inference kept apart by a taint each (a pod without the
matching toleration does not land there), mixed and shared without one."""

from django.db import migrations

DEFAULT_POOLS = [
    {
        "name": "training",
        "display_name": "Training",
        "description": "Dedicated to training jobs: steady, near-full GPU use, gang-scheduled "
        "multi-node jobs. Tainted so nothing else lands here.",
        "labels": {"workload-type": "training", "batch-scheduling": "enabled"},
        "taint_key": "workload-training",
        "taint_value": "true",
        "taint_effect": "NoSchedule",
        "min_nodes": 2,
    },
    {
        "name": "inference",
        "display_name": "Inference",
        "description": "Dedicated to latency-sensitive serving. Tainted so training cannot "
        "contend for PCIe and memory bandwidth.",
        "labels": {"workload-type": "inference"},
        "taint_key": "workload-inference",
        "taint_value": "true",
        "taint_effect": "NoSchedule",
        "min_nodes": 2,
    },
    {
        "name": "mixed",
        "display_name": "Mixed / reserve",
        "description": "Capacity held for either workload, moved to a dedicated pool when needed.",
        "labels": {"workload-type": "mixed"},
    },
    {
        "name": "shared",
        "display_name": "Shared",
        "description": "Development, debugging and low-frequency inference, shared by teams.",
        "labels": {"workload-type": "shared"},
    },
]


def create_pools(apps, schema_editor):
    Pool = apps.get_model("pools", "Pool")
    for definition in DEFAULT_POOLS:
        Pool.objects.get_or_create(name=definition["name"], defaults=definition)


def remove_pools(apps, schema_editor):
    Pool = apps.get_model("pools", "Pool")
    Pool.objects.filter(name__in=[p["name"] for p in DEFAULT_POOLS], nodes__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("pools", "0002_pools_and_nodes")]
    operations = [migrations.RunPython(create_pools, remove_pools)]
