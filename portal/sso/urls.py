"""mozilla-django-oidc's sign-in and callback, under the portal's names and paths
(/oidc/authenticate/, /oidc/callback/), open without a login like the sign-in page."""

from django.contrib.auth.decorators import login_not_required
from django.urls import path
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

from portal.sso import views

urlpatterns = [
    path(
        "callback/",
        login_not_required(views.sso_only(views.AuthenticationCallbackView.as_view())),
        name="oidc_authentication_callback",
    ),
    path(
        "authenticate/",
        login_not_required(views.sso_only(OIDCAuthenticationRequestView.as_view())),
        name="oidc_authentication_init",
    ),
]
