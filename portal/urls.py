from csp.decorators import csp_replace
from django.contrib import admin
from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal import favicon, health, metrics_view
from portal.sso import views as sso_views

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view.metrics, name="metrics"),  # for a bearer token, no login
    path("metrics/pools", metrics_view.pool_membership, name="metrics-pools"),  # the same
    # Browsers ask for /favicon.ico on their own, before any login (the pages link the SVG).
    path("favicon.ico", favicon.favicon, name="favicon"),
    # Password and single sign-on (portal/sso/): the callback is /oidc/callback/.
    path("login/", sso_views.LoginView.as_view(), name="login"),
    path("logout/", sso_views.LogoutView.as_view(), name="logout"),
    path("oidc/", include("portal.sso.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include("pools.api.urls")),
    # The schema answers token clients too (drf-spectacular checks the permission itself);
    # the docs page is for people, behind the login.
    path("api/schema/", login_not_required(SpectacularAPIView.as_view()), name="schema"),
    # The split view serves its start-up script as a file, not inline (the CSP allows no
    # inline script); Swagger UI's stylesheet draws its icons from data: images.
    path(
        "api/docs/",
        csp_replace({"img-src": ["'self'", "data:"]})(
            login_required(SpectacularSwaggerSplitView.as_view(url_name="schema"))
        ),
        name="api-docs",
    ),
    path("", include("pools.urls")),
]
