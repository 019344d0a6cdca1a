"""GPU pods count every GPU unit they ask for: whole GPUs, MIG instances, shared GPUs.

Rows written before asked for whole GPUs only (a pod of MIG instances had no row), so their
units are their GPUs."""

from django.db import migrations, models
from django.db.models import F


def units_are_gpus(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("pools", "GpuPod").objects.update(units=F("gpus"))


class Migration(migrations.Migration):
    dependencies = [
        ("pools", "0023_plugin_config"),
    ]

    operations = [
        migrations.AddField(
            model_name="gpupod",
            name="unit_requests",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="gpupod",
            name="units",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(units_are_gpus, migrations.RunPython.noop, elidable=True),
    ]
