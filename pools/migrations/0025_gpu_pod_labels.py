"""A GPU pod keeps its labels: the disruption budgets that cover it select on them."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("pools", "0024_gpu_pod_units"),
    ]

    operations = [
        migrations.AddField(
            model_name="gpupod",
            name="labels",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
