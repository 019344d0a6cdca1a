"""Figures read when Prometheus scrapes /metrics: they already live in the database and in
Redis, so no process counts them. Each costs one round trip, has a short timeout, and never
fails the scrape: `portal_metrics_collector_up` says which one could not answer."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import redis
from celery import current_app
from django.conf import settings
from django.db.models import Count
from django.db.utils import Error as DatabaseError
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pools.models import MoveRequest

log = logging.getLogger(__name__)
# How long a scrape waits for Redis: Prometheus's own scrape timeout is 10 s by default, and
# the rest of the page must still be answered.
REDIS_TIMEOUT_SECONDS = 0.5
# kombu's Redis transport keeps a queue's messages of priority N (N > 0) under the key
# "<queue>\x06\x16<N>" beside "<queue>" itself, for its default priority steps.
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (3, 6, 9)


def moves_by_state() -> GaugeMetricFamily:
    """portal_moves{state}: one GROUP BY over the move requests."""
    counts = dict(MoveRequest.objects.order_by().values_list("state").annotate(n=Count("id")))
    family = GaugeMetricFamily("portal_moves", "Move requests in each state.", labels=["state"])
    for state in MoveRequest.State.values:
        family.add_metric([state], float(counts.get(state, 0)))
    return family


def queue_keys(queue: str) -> list[str]:
    return [queue] + [f"{queue}{PRIORITY_SEPARATOR}{step}" for step in PRIORITY_STEPS]


def celery_queue_length() -> GaugeMetricFamily:
    """portal_celery_queue_length{queue}: the tasks waiting in the broker (Redis lists)."""
    queue = current_app.conf.task_default_queue  # the portal's app (portal/celery.py)
    client = redis.Redis.from_url(
        settings.CELERY_BROKER_URL,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
    )
    try:
        pipe = client.pipeline(transaction=False)
        for key in queue_keys(queue):
            pipe.llen(key)
        waiting = sum(int(n) for n in pipe.execute())
    finally:
        client.close()
    family = GaugeMetricFamily(
        "portal_celery_queue_length",
        "Tasks waiting in the broker for a worker, by queue.",
        labels=["queue"],
    )
    family.add_metric([queue], float(waiting))
    return family


# What each collector may meet: the database or Redis down, slow or refusing.
READERS = {
    "moves": (moves_by_state, DatabaseError),
    "celery_queue": (celery_queue_length, redis.RedisError),
}


class ScrapeTimeFigures(Collector):
    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "portal_metrics_collector_up",
            "Whether a figure read at scrape time could be read (1) or not (0), by collector.",
            labels=["collector"],
        )
        for name, (read, failure) in READERS.items():
            try:
                yield read()
            except failure as exc:
                log.warning("metrics: reading %s failed: %s", name, exc)
                up.add_metric([name], 0.0)
            else:
                up.add_metric([name], 1.0)
        yield up
