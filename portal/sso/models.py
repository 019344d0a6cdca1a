from __future__ import annotations

from django.conf import settings
from django.db import models


class OidcIdentity(models.Model):
    """The provider's subject a portal user signs on as.

    Users are found by (issuer, subject), never by e-mail: a provider may give an address
    to someone else, the subject identifier it never reassigns.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_on_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "OpenID Connect identity"
        verbose_name_plural = "OpenID Connect identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_unique_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
