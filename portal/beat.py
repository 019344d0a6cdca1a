"""Celery beat's scheduler with a heartbeat: each tick of the scheduler's loop renews the
HEARTBEAT_FILE (pools.common.heartbeat), so a beat that hangs is restarted by its probe. Beat
wakes at least every HEARTBEAT_SECONDS (a tick reads the schedule in memory), so the
heartbeat's age does not depend on when the next task is due."""

from __future__ import annotations

from typing import Any

from celery.beat import PersistentScheduler
from django.conf import settings

from pools.common.heartbeat import Heartbeat


class HeartbeatScheduler(PersistentScheduler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.heartbeat = Heartbeat(settings.HEARTBEAT_FILE, settings.HEARTBEAT_SECONDS)
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        self.heartbeat.renew()
        due_in = float(super().tick(*args, **kwargs))
        return min(due_in, self.heartbeat.every) if self.heartbeat.path else due_in
