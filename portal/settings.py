"""Django settings, read from the environment only (see portal/env.py and README.md)."""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from pools.core.names import label_key_problem
from portal.env import (
    env_bool,
    env_database,
    env_float,
    env_int,
    env_list,
    env_redis_url,
    env_secret,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", False)

_secret = env_secret("DJANGO_SECRET_KEY")
if _secret is None:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY: required when DJANGO_DEBUG is off "
            "(or set DJANGO_SECRET_KEY_FILE to a mounted secret)"
        )
    _secret = "insecure-debug-only-key-never-used-in-production-0123456789"  # noqa: S105
SECRET_KEY = _secret

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "pools",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every view needs a login unless it says otherwise (@login_not_required).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.portal",
            ],
        },
    },
]

DATABASES = {"default": env_database("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# --- Security: strict unless debugging. `manage.py check --deploy` must stay clean. ---
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
# Kubelet probes speak plain HTTP to the pod; they must not be redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Cache: the metrics cache lives here (Redis in production). ---
_cache_url = env_url("CACHE_URL", None, schemes={"redis", "rediss"})
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
        if _cache_url
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Celery (namespace CELERY_, read by portal/celery.py). ---
CELERY_BROKER_URL = env_redis_url("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_CONNECTION_TIMEOUT = 3.0
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True  # the database is the record of what a task did
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 900, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 840, minimum=1)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Redelivery of an unacknowledged task waits this long; the database sweep, not
    # redelivery, is what resumes a move a dead worker left half done.
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60),
}
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_ALWAYS_EAGER = False

# --- Outside systems. ---
PROMETHEUS_URL = env_url("PROMETHEUS_URL", None, schemes={"http", "https"})
PROMETHEUS_TIMEOUT = env_float("PROMETHEUS_TIMEOUT", 2.0, minimum=0.1)
DCGM_NODE_LABEL = env_str("DCGM_NODE_LABEL", "Hostname")
KUBECONFIG = env_str("KUBECONFIG", "")
KUBE_CONTEXT = env_str("KUBE_CONTEXT", "")
KUBE_IN_CLUSTER = env_bool("KUBE_IN_CLUSTER", False)
KUBE_TIMEOUT = env_float("KUBE_TIMEOUT", 5.0, minimum=0.1)

# Which readiness checks make /readyz answer 503 when they fail.
READYZ_REQUIRED = env_list("READYZ_REQUIRED", ["database", "broker"])
_unknown = set(READYZ_REQUIRED) - {"database", "broker", "prometheus", "kubernetes"}
if _unknown:
    raise ImproperlyConfigured(
        f"READYZ_REQUIRED: unknown check(s) {', '.join(sorted(_unknown))}; "
        "choose from database, broker, prometheus, kubernetes"
    )

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "pools.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",  # the pages' calls, with CSRF
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_THROTTLE_CLASSES": ["pools.api.permissions.ApiTokenThrottle"],
    "DEFAULT_THROTTLE_RATES": {"token": env_str("API_TOKEN_RATE", "1200/min")},
    "EXCEPTION_HANDLER": "pools.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU node-pool portal API",
    "DESCRIPTION": "Pools, GPU nodes with their DCGM metrics, node moves with approvals, and "
    "the audit log. Every failure has the shape "
    '{"error": {"code": ..., "message": ..., "fields": {...}}}.',
    "VERSION": "1.0.0",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",  # served from our own static files, no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SECURITY": [{"bearerToken": []}],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# --- Pools and the inventory ---
# The node label that says which pool a node is in; many clusters already have one
# (cloud.google.com/gke-nodepool, karpenter.sh/nodepool, their own).
POOL_LABEL_KEY = env_str("POOL_LABEL_KEY", "gpu-pool")
if _problem := label_key_problem(POOL_LABEL_KEY):
    raise ImproperlyConfigured(f"POOL_LABEL_KEY: {POOL_LABEL_KEY!r} is not a label key: {_problem}")
INVENTORY_SYNC_SECONDS = env_int("INVENTORY_SYNC_SECONDS", 30, minimum=5)
INVENTORY_PAGE_SIZE = env_int("INVENTORY_PAGE_SIZE", 500, minimum=1)
PATCH_MAX_CONFLICTS = env_int("PATCH_MAX_CONFLICTS", 5, minimum=0)
PATCH_MAX_RETRIES = env_int("PATCH_MAX_RETRIES", 4, minimum=0)
PATCH_BACKOFF_SECONDS = env_float("PATCH_BACKOFF_SECONDS", 0.5, minimum=0.0)
CELERY_BEAT_SCHEDULE = {
    "sync-inventory": {
        "task": "pools.tasks.sync_inventory",
        "schedule": float(INVENTORY_SYNC_SECONDS),
        "options": {"expires": float(INVENTORY_SYNC_SECONDS)},
    },
}

# How long an Idempotency-Key's first answer is kept for retries.
IDEMPOTENCY_KEY_HOURS = env_int("IDEMPOTENCY_KEY_HOURS", 24, minimum=1)

# --- Metrics ---
METRICS_CACHE_SECONDS = env_int("METRICS_CACHE_SECONDS", 10, minimum=0)
# Behind a ServiceMonitor the workload's pod label arrives as exported_pod.
DCGM_POD_LABEL = env_str("DCGM_POD_LABEL", "exported_pod")
DCGM_NAMESPACE_LABEL = env_str("DCGM_NAMESPACE_LABEL", "exported_namespace")
GPU_HOT_CELSIUS = env_float("GPU_HOT_CELSIUS", 85.0, minimum=0.0)
GPU_IDLE_WINDOW = env_str("GPU_IDLE_WINDOW", "1h")
# How often the live parts of the pages refresh in the browser.
LIVE_REFRESH_SECONDS = env_int("LIVE_REFRESH_SECONDS", 10, minimum=1)

# --- Moves ---
MOVE_PENDING_HOURS = env_int("MOVE_PENDING_HOURS", 72, minimum=1)  # then a request expires
MOVE_LEASE_SECONDS = env_int("MOVE_LEASE_SECONDS", 120, minimum=1)  # a worker's claim on a node
# How long an approved move or a queued node may wait before the sweep enqueues it again.
MOVE_SWEEP_GRACE_SECONDS = env_int("MOVE_SWEEP_GRACE_SECONDS", 30, minimum=1)
MOVE_ITEM_MAX_RETRIES = env_int("MOVE_ITEM_MAX_RETRIES", 5, minimum=0)
DRAIN_POLL_SECONDS = env_float("DRAIN_POLL_SECONDS", 5.0, minimum=0.05)
CELERY_BEAT_SCHEDULE.update(
    {
        "sweep-moves": {"task": "pools.tasks.sweep_moves", "schedule": 30.0},
        "return-loans": {"task": "pools.tasks.return_loans", "schedule": 30.0},
        "expire-moves": {"task": "pools.tasks.expire_moves", "schedule": 300.0},
        "purge-idempotency-records": {
            "task": "pools.tasks.purge_idempotency_records",
            "schedule": 3600.0,
        },
    }
)
