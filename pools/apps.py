from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "GPU node pools"

    def ready(self) -> None:
        from pools import (
            system_checks,  # noqa: F401 -- registers check --deploy's pool check
            tasks,  # noqa: F401 -- connects the enqueuer to pools.events
        )
        from pools.api import schema  # noqa: F401 -- registers the OpenAPI auth extension
