from django.db import migrations, models


class Migration(migrations.Migration):
    """Node capacity (CPU, memory) beside allocatable, and pod slots; two more drill kinds:
    a GPU fault (an injected XID) and a new node joining."""

    dependencies = [
        ("pools", "0013_drills"),
    ]

    operations = [
        migrations.AddField(
            model_name="node",
            name="cpu_capacity_milli",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="node",
            name="memory_capacity_bytes",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="node",
            name="pods_allocatable",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="drill",
            name="kind",
            field=models.CharField(
                choices=[
                    ("node_down", "node down (cordon)"),
                    ("gpu_fault", "GPU fault (injected XID)"),
                    ("node_joins", "a new node joins"),
                ],
                default="node_down",
                max_length=20,
            ),
        ),
    ]
