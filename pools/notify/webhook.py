"""POST one JSON message per event to the configured webhook (NOTIFY_WEBHOOK_URL)."""

from __future__ import annotations

from typing import Any

import requests

from pools.core.redact import redact_url
from pools.notify.errors import NotificationFailed


def webhook_post(url: str, body: dict[str, Any], *, timeout: float) -> None:
    try:
        response = requests.post(url, json=body, timeout=timeout, allow_redirects=False)
    except requests.RequestException as exc:
        # The URL is a secret (a Slack webhook's path is its key): never in a message.
        raise NotificationFailed(
            f"webhook unreachable: {type(exc).__name__}", transient=True
        ) from None
    if response.status_code >= 300:
        transient = response.status_code == 429 or response.status_code >= 500
        raise NotificationFailed(
            f"webhook answered {response.status_code} {redact_url(response.reason or '')}",
            transient=transient,
        )
