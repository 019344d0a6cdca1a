"""Django settings, read from the environment only (see portal/env.py and docs/configuration.md)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from pools.common.guarded_cache import caches_setting
from pools.core.clusters import DEFAULT_COLOUR, ClusterAccess
from pools.core.names import dns_label_problem, label_key_problem
from portal.clusters_file import cluster_settings
from portal.env import (
    EnvError,
    env_bool,
    env_choice,
    env_database,
    env_email,
    env_file,
    env_float,
    env_headers,
    env_hosts,
    env_int,
    env_link_template,
    env_list,
    env_origins,
    env_plugin_configs,
    env_port,
    env_prometheus_label,
    env_promql_duration,
    env_rate,
    env_redis_url,
    env_secret,
    env_str,
    env_time_zone,
    env_url,
)
from portal.logging_config import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", False)

_secret = env_secret("DJANGO_SECRET_KEY")
if _secret is None:
    if not DEBUG:
        raise EnvError(
            "DJANGO_SECRET_KEY",
            "required when DJANGO_DEBUG is off (or set DJANGO_SECRET_KEY_FILE to a mounted secret)",
        )
    _secret = "insecure-debug-only-key-never-used-in-production-0123456789"  # noqa: S105
SECRET_KEY = _secret

ALLOWED_HOSTS = env_hosts("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_origins("DJANGO_CSRF_TRUSTED_ORIGINS")

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
    # First: the request id, the request's time and its log line cover every other layer.
    "portal.middleware.RequestObservationMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before the sessions and the throttle: what they cannot reach is recorded per request.
    "portal.middleware.OutsideSystemsMiddleware",
    # Before whitenoise, so the static files carry the policy too.
    "portal.csp_policy.KeptPolicyCSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every view needs a login unless it says otherwise (@login_not_required).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # After the login check, which has loaded the user: the user joins the log context.
    "portal.middleware.UserLogContextMiddleware",
    # Which cluster's pools and nodes the request reads and changes (?cluster=).
    "portal.cluster_scope.ClusterScopeMiddleware",
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
DATABASES["default"]["CONN_MAX_AGE"] = env_int(
    "DATABASE_CONN_MAX_AGE", 60, minimum=0, maximum=86_400
)
# A reused connection is checked before a request's first query: one the server dropped
# (a failover, a restart, pg_terminate_backend) is replaced instead of answering 500.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
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
TIME_ZONE = env_time_zone("TIME_ZONE", "UTC")
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
# Kubelet probes and Prometheus's scrapes speak plain HTTP to the pod; they must not be
# redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$", r"^metrics/pools$"]
SECURE_HSTS_SECONDS = env_int(
    "DJANGO_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0, maximum=63_072_000
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Only this origin's scripts, styles, images and connections; no inline script or style
# (the templates have none), so an injected <script> or style attribute does not run.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "object-src": ["'none'"],
    }
}
if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Cache: the metrics cache lives here (Redis in production). ---
_cache_url = env_url("CACHE_URL", None, schemes={"redis", "rediss"})
# Guarded: with Redis down, pages and the API answer without the cache and say so.
CACHES = caches_setting(_cache_url)

# --- Celery (namespace CELERY_, read by portal/celery.py). ---
CELERY_BROKER_URL = env_redis_url("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_CONNECTION_TIMEOUT = 3.0
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True  # the database is the record of what a task did
# A drain-first node runs in one task: its drain deadline must end before the soft limit
# (pools.core.checks.max_drain_seconds refuses a longer one), so the default leaves room for
# the form's default 30-minute drain.
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 2400, minimum=10, maximum=86_400)
CELERY_TASK_SOFT_TIME_LIMIT = env_int(
    "CELERY_TASK_SOFT_TIME_LIMIT",
    max(1, CELERY_TASK_TIME_LIMIT - 60),
    minimum=1,
    maximum=86_400,
)
if CELERY_TASK_SOFT_TIME_LIMIT >= CELERY_TASK_TIME_LIMIT:
    # The soft limit is the task's chance to record what it did before the hard kill.
    raise EnvError(
        "CELERY_TASK_SOFT_TIME_LIMIT",
        f"expected less than CELERY_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT}), "
        f"got {CELERY_TASK_SOFT_TIME_LIMIT}",
    )
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Redelivery of an unacknowledged task waits this long; the database sweep, not
    # redelivery, is what resumes a move a dead worker left half done.
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60, maximum=604_800),
}
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "portal.beat:HeartbeatScheduler"
# Liveness: the worker, beat and the inventory watcher renew this file from their main
# loop every HEARTBEAT_SECONDS; `python -m pools.common.heartbeat FILE MAX_AGE` is their probe.
HEARTBEAT_FILE = env_str("HEARTBEAT_FILE", "")
if HEARTBEAT_FILE and not Path(HEARTBEAT_FILE).is_absolute():
    raise EnvError("HEARTBEAT_FILE", f"expected an absolute path, got {HEARTBEAT_FILE!r}")
HEARTBEAT_SECONDS = env_float("HEARTBEAT_SECONDS", 10.0, minimum=0.1, maximum=300.0)
CELERY_TASK_ALWAYS_EAGER = False

# The port `make demo` serves the portal on (scripts/demo.py reads it with the same rule).
DEMO_PORT = env_port("DEMO_PORT", 8000)

# --- Outside systems. ---
PROMETHEUS_URL = env_url("PROMETHEUS_URL", None, schemes={"http", "https"})
PROMETHEUS_TIMEOUT = env_float("PROMETHEUS_TIMEOUT", 2.0, minimum=0.1, maximum=60.0)
# Prometheus behind authentication (a gateway, Mimir, Cortex, Thanos, a managed service):
# a bearer token (its file is read again whenever it changes: a rotated token is used at
# once) or basic auth, a CA bundle, a client certificate, and headers such as X-Scope-OrgID.
PROMETHEUS_BEARER_TOKEN = env_secret("PROMETHEUS_BEARER_TOKEN")
PROMETHEUS_BEARER_TOKEN_FILE = env_str("PROMETHEUS_BEARER_TOKEN_FILE", "")
PROMETHEUS_USERNAME = env_str("PROMETHEUS_USERNAME", "")
PROMETHEUS_PASSWORD = env_secret("PROMETHEUS_PASSWORD")
PROMETHEUS_CA_BUNDLE = env_file("PROMETHEUS_CA_BUNDLE")
PROMETHEUS_CLIENT_CERT = env_file("PROMETHEUS_CLIENT_CERT")
PROMETHEUS_CLIENT_KEY = env_file("PROMETHEUS_CLIENT_KEY")
PROMETHEUS_HEADERS = env_headers("PROMETHEUS_HEADERS")
if bool(PROMETHEUS_USERNAME) != bool(PROMETHEUS_PASSWORD):
    raise EnvError(
        "PROMETHEUS_PASSWORD" if PROMETHEUS_USERNAME else "PROMETHEUS_USERNAME",
        "basic auth needs both PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD (or its _FILE)",
    )
if PROMETHEUS_USERNAME and PROMETHEUS_BEARER_TOKEN:
    raise EnvError(
        "PROMETHEUS_BEARER_TOKEN",
        "set a bearer token or basic auth (PROMETHEUS_USERNAME), not both",
    )
if PROMETHEUS_CLIENT_KEY and not PROMETHEUS_CLIENT_CERT:
    raise EnvError("PROMETHEUS_CLIENT_KEY", "needs PROMETHEUS_CLIENT_CERT, its certificate")
if (PROMETHEUS_BEARER_TOKEN or PROMETHEUS_USERNAME) and "@" in urlsplit(
    PROMETHEUS_URL or ""
).netloc:
    raise EnvError("PROMETHEUS_URL", "carries a user and password: give them one way only")
DCGM_NODE_LABEL = env_prometheus_label("DCGM_NODE_LABEL", "Hostname")
KUBECONFIG = env_str("KUBECONFIG", "")
KUBE_CONTEXT = env_str("KUBE_CONTEXT", "")
KUBE_IN_CLUSTER = env_bool("KUBE_IN_CLUSTER", False)
# False: this process calls no API server, of any cluster it serves (the chart's web pods,
# which mount no credentials): its /readyz reports each inventory lease's age instead.
KUBE_API_ACCESS = env_bool("KUBE_API_ACCESS", True)
KUBE_TIMEOUT = env_float("KUBE_TIMEOUT", 5.0, minimum=0.1, maximum=300.0)

# Links out to the team's dashboards, shown on the node and pool pages where set.
GRAFANA_NODE_URL = env_link_template("GRAFANA_NODE_URL", "node")
GRAFANA_POOL_URL = env_link_template("GRAFANA_POOL_URL", "pool")

# Which readiness checks make /readyz answer 503 when they fail.
# Only what makes a web pod useless takes it out of the Service: without the database
# nothing can be shown; without Redis (the broker, the cache) every page still answers,
# degraded and saying so, and a failed broker check on every pod would be a full outage.
READYZ_REQUIRED = env_list(
    "READYZ_REQUIRED",
    ["database"],
    choices={"database", "broker", "prometheus", "kubernetes", "pool_definitions"},
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "pools.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",  # the pages' calls, with CSRF
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["pools.api.parsers.StrictJSONParser"],
    "DEFAULT_THROTTLE_CLASSES": ["pools.api.permissions.ApiTokenThrottle"],
    "DEFAULT_THROTTLE_RATES": {"token": env_rate("API_TOKEN_RATE", "1200/min")},
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
    "SWAGGER_UI_FAVICON_HREF": "/favicon.ico",  # the portal's own icon
    "REDOC_DIST": "SIDECAR",
    "SECURITY": [{"bearerToken": []}],
    "ENUM_NAME_OVERRIDES": {
        "InsightLevelEnum": "pools.api.insights.LEVELS",
        # Two choice sets share the field name "kind": each gets its own schema name.
        "MoveKindEnum": "pools.models.MoveRequest.Kind",
        "DrillKindEnum": "pools.models.Drill.Kind",
    },
}

# One handler for Django, gunicorn and Celery, with the log context and the redaction filter
# (portal/logging_config.py): readable lines, or one JSON event per line for a log collector.
LOG_LEVEL = env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
LOG_FORMAT = env_choice("LOG_FORMAT", "text", ("text", "json"))
LOGGING = logging_config(LOG_FORMAT, LOG_LEVEL)
# Celery would otherwise replace the root logger's handlers with its own, unfiltered ones;
# portal/celery.py applies LOGGING in the worker and beat instead.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- Pools and the inventory ---
# The node label that says which pool a node is in; many clusters already have one
# (cloud.google.com/gke-nodepool, karpenter.sh/nodepool, their own).
POOL_LABEL_KEY = env_str("POOL_LABEL_KEY", "gpu-pool")
if _problem := label_key_problem(POOL_LABEL_KEY):
    raise EnvError("POOL_LABEL_KEY", f"expected a label key: {_problem}, got {POOL_LABEL_KEY!r}")
# --- The cluster (pools.core.clusters): described by the variables above (KUBECONFIG,
# PROMETHEUS_URL, …, and CLUSTER_NAME), or by CLUSTERS_FILE (YAML; secrets from files),
# never both. This version serves one cluster per portal.
CLUSTER_NAME = env_str("CLUSTER_NAME", "default")
if _problem := dns_label_problem(CLUSTER_NAME):
    raise EnvError("CLUSTER_NAME", f"expected a DNS label: {_problem}, got {CLUSTER_NAME!r}")
# A querier holding several clusters' series (Thanos, Mimir, VictoriaMetrics, or a Prometheus
# federating each cluster's): every query selects PROMETHEUS_CLUSTER_LABEL="<value>", the
# value being the cluster's name unless PROMETHEUS_CLUSTER_VALUE says otherwise.
PROMETHEUS_CLUSTER_LABEL = env_prometheus_label("PROMETHEUS_CLUSTER_LABEL", "")
PROMETHEUS_CLUSTER_VALUE = env_str("PROMETHEUS_CLUSTER_VALUE", "")
if PROMETHEUS_CLUSTER_VALUE and not PROMETHEUS_CLUSTER_LABEL:
    raise EnvError("PROMETHEUS_CLUSTER_VALUE", "needs PROMETHEUS_CLUSTER_LABEL, its label")
# The cluster's colour beside its name at the top of every page (CLUSTERS_FILE's `colour`).
CLUSTER_COLOUR = DEFAULT_COLOUR
# The further clusters this portal serves (CLUSTERS_FILE's entries after the first), by name.
OTHER_CLUSTERS: dict[str, ClusterAccess] = {}
CLUSTERS_FILE = env_str("CLUSTERS_FILE", "")
if CLUSTERS_FILE:
    _from_file = cluster_settings(CLUSTERS_FILE, os.environ, kube=KUBE_API_ACCESS)
    _cluster = _from_file.cluster
    OTHER_CLUSTERS = {other.name: other for other in _from_file.others}
    CLUSTER_NAME = _cluster.name
    CLUSTER_COLOUR = _cluster.colour
    KUBECONFIG, KUBE_CONTEXT, KUBE_IN_CLUSTER = (
        _cluster.kubeconfig,
        _cluster.context,
        _cluster.in_cluster,
    )
    if _cluster.pool_label_key:
        if os.environ.get("POOL_LABEL_KEY"):
            raise EnvError("POOL_LABEL_KEY", "set it here or as the cluster's pool_label_key")
        POOL_LABEL_KEY = _cluster.pool_label_key
    if _cluster.metrics is not None:
        PROMETHEUS_URL = _cluster.metrics.url
        PROMETHEUS_BEARER_TOKEN = _from_file.bearer_token
        PROMETHEUS_BEARER_TOKEN_FILE = _cluster.metrics.bearer_token_file
        PROMETHEUS_USERNAME = _cluster.metrics.username
        PROMETHEUS_PASSWORD = _from_file.password
        PROMETHEUS_CA_BUNDLE = _cluster.metrics.ca_file
        PROMETHEUS_CLIENT_CERT = _cluster.metrics.cert_file
        PROMETHEUS_CLIENT_KEY = _cluster.metrics.key_file
        PROMETHEUS_HEADERS = _from_file.headers
        PROMETHEUS_CLUSTER_LABEL = _cluster.metrics.cluster_label
        PROMETHEUS_CLUSTER_VALUE = _cluster.metrics.cluster_value
if PROMETHEUS_CLUSTER_LABEL and not PROMETHEUS_CLUSTER_VALUE:
    PROMETHEUS_CLUSTER_VALUE = CLUSTER_NAME

# Where the lack-of-resources drill makes its probe pod (the chart's Role lets the portal
# create and delete pods there, and nowhere else).
DRILL_NAMESPACE = env_str("DRILL_NAMESPACE", "default")
if _problem := dns_label_problem(DRILL_NAMESPACE):
    raise EnvError(
        "DRILL_NAMESPACE", f"expected a namespace name: {_problem}, got {DRILL_NAMESPACE!r}"
    )
# The full sync lists every node and pod; it is the safety net behind the watcher.
INVENTORY_SYNC_SECONDS = env_int("INVENTORY_SYNC_SECONDS", 300, minimum=5, maximum=3600)
# How often the watcher lists DRA's ResourceSlices, DeviceClasses, claims and templates.
DRA_SYNC_SECONDS = env_int("DRA_SYNC_SECONDS", 15, minimum=1, maximum=3600)
# How long the maintenance headroom keeps the cluster's PodDisruptionBudgets once listed.
BUDGETS_CACHE_SECONDS = env_int("BUDGETS_CACHE_SECONDS", 15, minimum=0, maximum=600)
INVENTORY_PAGE_SIZE = env_int("INVENTORY_PAGE_SIZE", 500, minimum=1, maximum=10_000)
# A garbage collection pausing a web worker this long is logged (portal.gc_pauses); 0: none.
GC_PAUSE_LOG_SECONDS = env_float("GC_PAUSE_LOG_SECONDS", 0.2, minimum=0.0, maximum=60.0)
# A web request running this long has its stack logged once, while it runs (portal.
# slow_requests): where a stall waits. 0: never.
SLOW_REQUEST_STACK_SECONDS = env_float(
    "SLOW_REQUEST_STACK_SECONDS", 0.0, minimum=0.0, maximum=600.0
)
# Processes beside the watcher that read a large pod listing's pages (pools.inventory.
# pod_pages); 0: the watcher reads them itself.
INVENTORY_READ_PROCESSES = env_int("INVENTORY_READ_PROCESSES", 2, minimum=0, maximum=8)
# The pod labels that say a GPU pod's workload type and team (for the pool insights).
POD_WORKLOAD_LABEL = env_str("POD_WORKLOAD_LABEL", "workload-type")
POD_TEAM_LABEL = env_str("POD_TEAM_LABEL", "team")
# The pod annotations that name whom to tell when a pod's GPUs sit idle, and (set to
# "never") keep them from being reclaimed.
RECLAIM_CONTACT_ANNOTATION = env_str("RECLAIM_CONTACT_ANNOTATION", "gpu-portal.io/contact")
RECLAIM_OPT_OUT_ANNOTATION = env_str("RECLAIM_OPT_OUT_ANNOTATION", "gpu-portal.io/reclaim")
for _name, _key in (
    ("POD_WORKLOAD_LABEL", POD_WORKLOAD_LABEL),
    ("POD_TEAM_LABEL", POD_TEAM_LABEL),
    ("RECLAIM_CONTACT_ANNOTATION", RECLAIM_CONTACT_ANNOTATION),
    ("RECLAIM_OPT_OUT_ANNOTATION", RECLAIM_OPT_OUT_ANNOTATION),
):
    if _problem := label_key_problem(_key):
        raise EnvError(_name, f"expected a label key: {_problem}, got {_key!r}")
# The inventory watcher's lease: a watcher that stops renewing it for this long is taken
# over by another (it renews every third of it).
INVENTORY_LEASE_SECONDS = env_int("INVENTORY_LEASE_SECONDS", 15, minimum=3, maximum=300)
# How long the inventory's writer may go without an answer from the API server, while
# something goes wrong, before every page says the nodes shown may be stale (a watcher hears
# from it at least once a minute, as each watch stream ends).
INVENTORY_STALE_SECONDS = env_int("INVENTORY_STALE_SECONDS", 120, minimum=1, maximum=86_400)
# How long a GPU pod's row is kept after the pod is deleted.
POD_HISTORY_DAYS = env_int("POD_HISTORY_DAYS", 30, minimum=1, maximum=3650)
PATCH_MAX_CONFLICTS = env_int("PATCH_MAX_CONFLICTS", 5, minimum=0, maximum=100)
PATCH_MAX_RETRIES = env_int("PATCH_MAX_RETRIES", 4, minimum=0, maximum=100)
PATCH_BACKOFF_SECONDS = env_float("PATCH_BACKOFF_SECONDS", 0.5, minimum=0.0, maximum=60.0)
CELERY_BEAT_SCHEDULE = {
    "sync-inventory": {
        "task": "pools.tasks.sync_inventory",
        "schedule": float(INVENTORY_SYNC_SECONDS),
        "options": {"expires": float(INVENTORY_SYNC_SECONDS)},
    },
}

# How long each web process remembers an API token it found (revocations made in another
# process, deactivated users and removed roles take effect within this); 0 remembers none.
API_TOKEN_CACHE_SECONDS = env_int("API_TOKEN_CACHE_SECONDS", 5, minimum=0, maximum=60)

# How long an Idempotency-Key's first answer is kept for retries.
IDEMPOTENCY_KEY_HOURS = env_int("IDEMPOTENCY_KEY_HOURS", 24, minimum=1, maximum=720)

# --- Metrics ---
METRICS_CACHE_SECONDS = env_int("METRICS_CACHE_SECONDS", 10, minimum=0, maximum=3600)
# How long past METRICS_CACHE_SECONDS the node figures are still served while their refresh
# runs, instead of every page waiting for it (0: pages wait).
METRICS_STALE_SECONDS = env_int("METRICS_STALE_SECONDS", 10, minimum=0, maximum=3600)
# The pool insights read weeks of pod history: computed once, kept this long (0: never kept).
INSIGHTS_CACHE_SECONDS = env_int("INSIGHTS_CACHE_SECONDS", 300, minimum=0, maximum=86400)
if INSIGHTS_CACHE_SECONDS:
    # Computed again ahead of expiry, so the pages find the 30-day insights ready.
    CELERY_BEAT_SCHEDULE["refresh-insights"] = {
        "task": "pools.tasks.refresh_insights",
        "schedule": max(30.0, INSIGHTS_CACHE_SECONDS / 2),
        "options": {"expires": max(30.0, INSIGHTS_CACHE_SECONDS / 2)},
    }
# Behind a ServiceMonitor the workload's pod label arrives as exported_pod.
DCGM_POD_LABEL = env_prometheus_label("DCGM_POD_LABEL", "exported_pod")
DCGM_NAMESPACE_LABEL = env_prometheus_label("DCGM_NAMESPACE_LABEL", "exported_namespace")
GPU_HOT_CELSIUS = env_float("GPU_HOT_CELSIUS", 85.0, minimum=1.0, maximum=150.0)
GPU_IDLE_WINDOW = env_promql_duration("GPU_IDLE_WINDOW", "1h")  # goes into PromQL as it is
# How often the live parts of the pages refresh in the browser.
LIVE_REFRESH_SECONDS = env_int("LIVE_REFRESH_SECONDS", 10, minimum=1, maximum=3600)
# The bearer token Prometheus sends to scrape the portal's own /metrics; without one,
# /metrics answers 404 (never public by accident).
METRICS_TOKEN = env_secret("METRICS_TOKEN", min_length=16)
# Where each process of gunicorn or Celery keeps its figures (prometheus-client's
# multiprocess mode; prometheus_client reads the variable itself). Emptied when the process
# group starts: gunicorn.conf.py, portal/celery.py.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
if PROMETHEUS_MULTIPROC_DIR and not Path(PROMETHEUS_MULTIPROC_DIR).is_absolute():
    raise EnvError(
        "PROMETHEUS_MULTIPROC_DIR", f"expected an absolute path, got {PROMETHEUS_MULTIPROC_DIR!r}"
    )
# The port a Celery worker or the inventory watcher serves its own /metrics on (the web
# serves /metrics on its HTTP port); 0: not served.
METRICS_PORT = env_port("METRICS_PORT", 0)

# --- Moves ---
# Then a request expires.
MOVE_PENDING_HOURS = env_int("MOVE_PENDING_HOURS", 72, minimum=1, maximum=8760)
# A worker's claim on a node.
MOVE_LEASE_SECONDS = env_int("MOVE_LEASE_SECONDS", 120, minimum=1, maximum=86_400)
# How long an approved move or a queued node may wait before the sweep enqueues it again.
MOVE_SWEEP_GRACE_SECONDS = env_int("MOVE_SWEEP_GRACE_SECONDS", 30, minimum=1, maximum=86_400)
# Nodes of one move a worker process changes at once (threads, each its own PATCH).
MOVE_PARALLEL_NODES = env_int("MOVE_PARALLEL_NODES", 8, minimum=1, maximum=64)
DRAIN_POLL_SECONDS = env_float("DRAIN_POLL_SECONDS", 5.0, minimum=0.05, maximum=300.0)
# A MIG reconfiguration: the site's named MIG configurations besides all-disabled and
# all-<profile> (the MIG manager's mig-parted config), and how long the MIG manager may take
# to apply one before the node is left cordoned and the reconfiguration failed.
MIG_CONFIGS = env_list("MIG_CONFIGS", [])
# The device plugin's sharing configurations a node may be switched to, by name:
# "default=whole,time-sliced-4=time-slicing:4" (pools.core.plugin_configs).
DEVICE_PLUGIN_CONFIGS = env_plugin_configs("DEVICE_PLUGIN_CONFIGS")
RECONFIGURE_WAIT_SECONDS = env_int("RECONFIGURE_WAIT_SECONDS", 600, minimum=1, maximum=86_400)
# Reserved: how long a move may keep retrying transient Kubernetes errors before a node fails.
MOVE_EXECUTION_DEADLINE_SECONDS = env_int(
    "MOVE_EXECUTION_DEADLINE_SECONDS", 900, minimum=60, maximum=86_400
)
# How often the beat takes each running maintenance a step further (a drain's evictions, a
# wave's hold): also how soon a refused eviction is asked again.
MAINTENANCE_TICK_SECONDS = env_int("MAINTENANCE_TICK_SECONDS", 10, minimum=1, maximum=3600)
# How often the beat starts the bookings whose window opens, ends those whose loan is back,
# and tells requesters a day and an hour ahead: a booking starts at most this late.
BOOKINGS_TICK_SECONDS = env_int("BOOKINGS_TICK_SECONDS", 30, minimum=1, maximum=3600)
# How often the beat looks for idle pods under the pools' reclaim policies (telling owners,
# ending the grace, evicting approved reclaims), and how long an approved reclaim may wait on
# a refusing disruption budget before it is recorded as failed.
RECLAIM_TICK_SECONDS = env_int("RECLAIM_TICK_SECONDS", 60, minimum=1, maximum=3600)
RECLAIM_EVICT_DEADLINE_SECONDS = env_int(
    "RECLAIM_EVICT_DEADLINE_SECONDS", 3600, minimum=60, maximum=7 * 86_400
)
CELERY_BEAT_SCHEDULE.update(
    {
        "advance-reclaims": {
            "task": "pools.tasks.advance_reclaims",
            "schedule": float(RECLAIM_TICK_SECONDS),
            "options": {"expires": float(RECLAIM_TICK_SECONDS)},
        },
        "sweep-moves": {"task": "pools.tasks.sweep_moves", "schedule": 30.0},
        "return-loans": {"task": "pools.tasks.return_loans", "schedule": 30.0},
        "expire-moves": {"task": "pools.tasks.expire_moves", "schedule": 300.0},
        "end-overdue-drills": {"task": "pools.tasks.end_overdue_drills", "schedule": 30.0},
        "advance-bookings": {
            "task": "pools.tasks.advance_bookings",
            "schedule": float(BOOKINGS_TICK_SECONDS),
            "options": {"expires": float(BOOKINGS_TICK_SECONDS)},
        },
        "advance-maintenances": {
            "task": "pools.tasks.advance_maintenances",
            "schedule": float(MAINTENANCE_TICK_SECONDS),
            "options": {"expires": float(MAINTENANCE_TICK_SECONDS)},
        },
        "purge-idempotency-records": {
            "task": "pools.tasks.purge_idempotency_records",
            "schedule": 3600.0,
        },
    }
)

# --- Notifications (pools/moves/notifications.py): both channels off unless configured ---
# The portal's own address, for links in notifications (https://portal.example.com).
_portal_url = env_origins("PORTAL_URL")
if len(_portal_url) > 1:
    raise EnvError("PORTAL_URL", "expected one address like https://portal.example.com")
PORTAL_URL = _portal_url[0].rstrip("/") if _portal_url else ""
NOTIFY_EMAIL = env_bool("NOTIFY_EMAIL", False)
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"  # tests: locmem (pytest-django)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_port("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise EnvError("EMAIL_USE_SSL", "set EMAIL_USE_TLS (STARTTLS) or EMAIL_USE_SSL, not both")
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0, minimum=0.1, maximum=300.0)
DEFAULT_FROM_EMAIL = env_email("NOTIFY_FROM_EMAIL", "gpu-portal@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# A secret: a Slack or Mattermost incoming webhook's path is its key.
_webhook = env_secret("NOTIFY_WEBHOOK_URL")
NOTIFY_WEBHOOK_URL = (
    env_url("NOTIFY_WEBHOOK_URL", None, {"NOTIFY_WEBHOOK_URL": _webhook}, schemes={"http", "https"})
    if _webhook
    else None
)
NOTIFY_WEBHOOK_TIMEOUT = env_float("NOTIFY_WEBHOOK_TIMEOUT", 5.0, minimum=0.1, maximum=60.0)
NOTIFY_MAX_RETRIES = env_int("NOTIFY_MAX_RETRIES", 5, minimum=0, maximum=50)
NOTIFY_RETRY_SECONDS = env_float("NOTIFY_RETRY_SECONDS", 30.0, minimum=0.0, maximum=3600.0)
CELERY_BEAT_SCHEDULE["announce-loans-ending"] = {
    "task": "pools.tasks.announce_loans_ending",
    "schedule": 60.0,
}

# --- Single sign-on (OpenID Connect, portal/sso/) ---
# Sets LOCAL_LOGIN_ENABLED, AUTHENTICATION_BACKENDS, OIDC_ENABLED, OIDC_ROLE_MAP (parsed),
# OIDC_GROUPS_CLAIM, OIDC_PROVIDER_NAME and, when OIDC_RP_CLIENT_ID is set, the OIDC_*
# settings mozilla-django-oidc reads; a bad value stops start-up naming the variable.
from portal.sso.config import sso_settings  # noqa: E402 -- kept with the block it configures

INSTALLED_APPS.append("portal.sso")
globals().update(sso_settings(cluster=CLUSTER_NAME, others=tuple(OTHER_CLUSTERS)))
