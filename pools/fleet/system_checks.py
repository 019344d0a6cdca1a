"""`manage.py check --deploy`: what a deployment should fix before it serves."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db.utils import Error as DatabaseError

from pools.fleet.selectors import pools_claiming_owned_keys


@checks.register("pools", deploy=True)
def pools_claiming_owned_keys_check(**kwargs: Any) -> list[checks.CheckMessage]:
    """Pools stored before the definition check refused keys another component owns."""
    try:
        claiming = pools_claiming_owned_keys()
    except DatabaseError:
        return []  # not migrated yet: there is no pool to report
    return [
        checks.Warning(
            f"Pool {name!r} claims what another component owns: {' '.join(problems)}",
            hint="Edit the pool's labels and taint: until then each move into or out of it "
            "strips those keys from the nodes it moves, and its nodes show as drifted.",
            obj=f"pool {name}",
            id="pools.W001",
        )
        for name, problems in claiming.items()
    ]
