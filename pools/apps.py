from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "GPU node pools"

    def ready(self) -> None:
        from pools import tasks  # noqa: F401 -- connects the enqueuer to pools.common.events
        from pools.api import schema  # noqa: F401 -- registers the OpenAPI auth extension
        from pools.fleet import system_checks  # noqa: F401 -- registers check --deploy's pool check
