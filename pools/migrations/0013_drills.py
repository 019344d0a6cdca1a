import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """Drills: failure rehearsals on a pool with a defined end, one at a time per pool."""

    dependencies = [
        ("pools", "0012_pool_utilisation_target"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Drill",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[("node_down", "node down (cordon)")],
                        default="node_down",
                        max_length=20,
                    ),
                ),
                ("node_name", models.CharField(max_length=253)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("starting", "Starting"),
                            ("running", "Running"),
                            ("passed", "Passed"),
                            ("failed", "Failed"),
                            ("errored", "Errored"),
                        ],
                        default="starting",
                        max_length=20,
                    ),
                ),
                ("hold_seconds", models.PositiveIntegerField(default=60)),
                ("started_at", models.DateTimeField(auto_now_add=True)),
                (
                    "ends_at",
                    models.DateTimeField(
                        help_text="The drill's end: the node is restored by then."
                    ),
                ),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("observed", models.JSONField(blank=True, default=dict)),
                ("checks", models.JSONField(blank=True, default=list)),
                ("error", models.TextField(blank=True)),
                (
                    "pool",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="drills",
                        to="pools.pool",
                    ),
                ),
                (
                    "started_by",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="drills",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-started_at", "-id"],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("state__in", ["starting", "running"])),
                        fields=("pool",),
                        name="one_active_drill_per_pool",
                    )
                ],
            },
        ),
    ]
