from django.contrib import admin

from portal.sso.models import OidcIdentity


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("user", "subject", "issuer", "last_sign_on_at")
    search_fields = ("user__username", "subject")
    readonly_fields = ("created_at", "last_sign_on_at")
