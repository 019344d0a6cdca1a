from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "GPU node pools"

    def ready(self) -> None:
        from pools.api import schema  # noqa: F401 -- registers the OpenAPI auth extension
