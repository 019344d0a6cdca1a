"""Register (or update) the portal as a client, with a fresh RSA signing key if none."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.management.base import BaseCommand, CommandParser
from oidc_provider.models import Client, ResponseType, RSAKey


class Command(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--client-id", required=True)
        parser.add_argument("--client-secret", required=True)
        parser.add_argument("--redirect-uri", required=True)
        parser.add_argument("--post-logout-redirect-uri", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        if not RSAKey.objects.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ).decode()
            RSAKey.objects.create(key=pem)
        client, _ = Client.objects.update_or_create(
            client_id=options["client_id"],
            defaults={
                "name": "GPU pool portal",
                "client_type": "confidential",
                "client_secret": options["client_secret"],
                "jwt_alg": "RS256",
                "require_consent": False,
                "reuse_consent": True,
                "_redirect_uris": options["redirect_uri"],
                "_post_logout_redirect_uris": options["post_logout_redirect_uri"],
                "_scope": "openid email profile groups",
            },
        )
        code, _ = ResponseType.objects.get_or_create(
            value="code", defaults={"description": "code (Authorization Code Flow)"}
        )
        client.response_types.set([code])
