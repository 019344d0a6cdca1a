"""Set up Django for a benchmark: a throwaway SQLite database, debug off, migrations run."""

from __future__ import annotations

import os
from pathlib import Path


def setup(workdir: Path, **env: str) -> None:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": "benchmark-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "DATABASE_URL": os.environ.get(
                "BENCH_DATABASE_URL", f"sqlite:///{workdir / 'bench.db'}"
            ),
            **env,
        }
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)  # production static storage
