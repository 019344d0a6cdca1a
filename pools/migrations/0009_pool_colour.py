from django.db import migrations, models

# The colours the four demo pools had in the style sheet before pools had a colour field.
KNOWN = {"training": "#d9822b", "inference": "#2b7bd9", "mixed": "#8a4fd1", "shared": "#2f9e6a"}
PALETTE = (
    "#d9822b",
    "#2b7bd9",
    "#8a4fd1",
    "#2f9e6a",
    "#b5468b",
    "#1f8a99",
    "#a0701a",
    "#5a62d6",
    "#6b8e23",
    "#9b5c3b",
    "#c0508a",
    "#3d7a5e",
)


def colour_existing_pools(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Every pool gets a colour: the four known pools keep theirs, the others take the
    palette's free colours in order of creation (the palette as it was at this migration)."""
    Pool = apps.get_model("pools", "Pool")
    used: list[str] = []
    pools = list(Pool.objects.order_by("created_at", "id"))
    for pool in pools:
        if pool.name in KNOWN:
            pool.colour = KNOWN[pool.name]
            used.append(pool.colour)
    for pool in pools:
        if not pool.colour:
            free = [c for c in PALETTE if c not in used]
            pool.colour = free[0] if free else PALETTE[len(used) % len(PALETTE)]
            used.append(pool.colour)
    Pool.objects.bulk_update(pools, ["colour"])


class Migration(migrations.Migration):
    """Pools have a colour (picked from a palette, editable), served as a style sheet."""

    dependencies = [
        ("pools", "0008_hardening"),
    ]

    operations = [
        migrations.AddField(
            model_name="pool",
            name="colour",
            field=models.CharField(
                blank=True,
                help_text="#rrggbb on chips and cards; empty picks the first free palette colour.",
                max_length=7,
            ),
        ),
        migrations.RunPython(colour_existing_pools, migrations.RunPython.noop),
    ]
