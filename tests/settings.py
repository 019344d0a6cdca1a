"""The real settings, read from a test environment (production-like: DEBUG off)."""

import os

_TEST_ENV = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "test-only-secret-key-that-is-long-enough-for-the-checks-0123456789",
    "DJANGO_ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
    "DJANGO_SECURE_SSL_REDIRECT": "false",
    "DJANGO_SECURE_COOKIES": "false",
    "DJANGO_HSTS_SECONDS": "0",
}
for _name, _value in _TEST_ENV.items():
    os.environ.setdefault(_name, _value)

from portal.settings import *  # noqa: E402, F403

# Tests do not run collectstatic; whitenoise serves from the finders instead.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
WHITENOISE_AUTOREFRESH = True
