from django.db import migrations


class Migration(migrations.Migration):
    """A loan's return is requested when its return moves are created, not done then: the
    field says so. MoveRequest.error was never written (errors are kept per item)."""

    dependencies = [
        ("pools", "0005_api_tokens_and_idempotency"),
    ]

    operations = [
        migrations.RenameField(
            model_name="moverequest",
            old_name="loan_returned_at",
            new_name="loan_return_requested_at",
        ),
        migrations.RemoveField(
            model_name="moverequest",
            name="error",
        ),
    ]
