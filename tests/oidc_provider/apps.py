from django.apps import AppConfig


class IdpConfig(AppConfig):
    name = "tests.oidc_provider"
    label = "idp"
    default_auto_field = "django.db.models.BigAutoField"
