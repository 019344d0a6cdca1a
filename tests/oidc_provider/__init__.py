"""A real OpenID Connect provider for the single sign-on tests: django-oidc-provider in a
small Django project of its own, run as a separate process (see `process.py`)."""
