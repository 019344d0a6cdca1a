"""The one retry policy for Kubernetes calls: transient failures only, bounded, with backoff.

409 Conflict is not handled here: only the caller knows what to re-read (see patcher.py).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from django.conf import settings
from kubernetes.client.exceptions import ApiException

from pools.common import observability
from pools.kube.client import translate
from pools.kube.errors import KubeError, KubeUnavailable

T = TypeVar("T")
MAX_DELAY = 30.0
log = logging.getLogger(__name__)


@dataclass
class RetryPolicy:
    attempts: int = field(default_factory=lambda: settings.PATCH_MAX_RETRIES + 1)
    base_delay: float = field(default_factory=lambda: settings.PATCH_BACKOFF_SECONDS)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        # Exponential backoff with full jitter between 50 % and 150 %, so clients that failed
        # together do not retry together; the server's Retry-After is a floor.
        backoff = self.base_delay * (2**attempt) * (0.5 + random.random())  # noqa: S311
        return min(MAX_DELAY, max(backoff, retry_after or 0.0))

    def call(self, action: Callable[[], T], *, doing: str) -> T:
        for attempt in range(self.attempts):
            try:
                return action()
            except Exception as exc:
                error = exc if isinstance(exc, KubeError) else translate(exc, doing=doing)
                if isinstance(exc, ApiException) and exc.status == 409:
                    raise exc from None  # the caller re-reads
                if not error.transient or attempt == self.attempts - 1:
                    if isinstance(error, KubeUnavailable) and attempt:
                        raise KubeUnavailable(
                            f"{error} (gave up after {attempt + 1} attempts)"
                        ) from exc
                    raise error from exc
                wait = self.delay(attempt, retry_after_seconds(exc))
                observability.kube_retry(exc)
                log.warning(
                    "%s (attempt %d of %d); retrying in %.2fs",
                    error,
                    attempt + 1,
                    self.attempts,
                    wait,
                )
                time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover


def retry_after_seconds(exc: Exception) -> float | None:
    """The seconds an answer's Retry-After header asks to wait (None without a number)."""
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
