import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """Pool insights: a per-pool utilisation target the indicators compare with, and the
    advisor's dismissed suggestions (hidden until their evidence changes)."""

    dependencies = [
        ("pools", "0011_loan_end_notice"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="pool",
            name="utilisation_target",
            field=models.PositiveSmallIntegerField(
                default=60,
                help_text="The average GPU utilisation (%) the pool should reach; the insights "
                "compare the pool's utilisation over weeks with it.",
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(100),
                ],
            ),
        ),
        migrations.CreateModel(
            name="AdviceDismissal",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=200, unique=True)),
                ("fingerprint", models.CharField(max_length=64)),
                ("reason", models.TextField()),
                ("dismissed_at", models.DateTimeField(auto_now=True)),
                (
                    "dismissed_by",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="advice_dismissals",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["-dismissed_at"]},
        ),
    ]
