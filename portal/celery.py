"""The Celery app, configured from Django settings (namespace ``CELERY_``)."""

import gc
import logging.config
import os
from typing import Any

from celery import Celery, bootsteps, signals

from pools.common import log_context
from portal.env import settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.on_configure.connect
def _settings_or_exit(**_: object) -> None:
    # Celery reads its configuration from Django's settings lazily, deep in the worker's
    # start-up; load them first so a configuration error is one line, not a traceback.
    settings_or_exit()


app.autodiscover_tasks()


class _Heartbeat(bootsteps.StartStopStep):
    """The worker's liveness (pools.common.heartbeat): a timer of the worker's own event loop
    renews HEARTBEAT_FILE, so a worker whose loop hangs stops renewing it and its probe
    has it restarted. Task processes run apart: a long task does not stop the heartbeat
    (its time limits end it)."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.timer_ref: Any = None

    def start(self, worker: Any) -> None:
        from django.conf import settings

        from pools.common.heartbeat import Heartbeat

        if not settings.HEARTBEAT_FILE:
            return
        heartbeat = Heartbeat(settings.HEARTBEAT_FILE, 0)
        heartbeat.renew()
        self.timer_ref = worker.timer.call_repeatedly(
            settings.HEARTBEAT_SECONDS, heartbeat.renew, priority=10
        )

    def stop(self, worker: Any) -> None:
        if self.timer_ref is not None:
            self.timer_ref.cancel()
            self.timer_ref = None


app.steps["worker"].add(_Heartbeat)

# Tasks that change nodes are declared with these options (see pools/tasks.py): the message
# is acknowledged only after the task returns, and a worker killed mid-task gives it back.
NODE_CHANGING_TASK_OPTIONS = {"acks_late": True, "reject_on_worker_lost": True}


@signals.setup_logging.connect
@signals.celeryd_init.connect
def _portal_logging(loglevel: int | str | None = None, **_: object) -> None:
    # Connected to setup_logging, this receiver replaces Celery's own logging set-up (its
    # handlers would carry neither the redaction filter nor the log context): the worker and
    # beat log through settings.LOGGING like the web, at LOG_LEVEL or at the command's
    # --loglevel when that says more. celeryd_init comes earlier, before the worker's first
    # warnings (running as root, say).
    from django.conf import settings

    config = settings.LOGGING
    wanted = logging.getLevelName(settings.LOG_LEVEL)
    if isinstance(loglevel, int) and loglevel < wanted:
        config = {**config, "root": {**config["root"], "level": logging.getLevelName(loglevel)}}
    logging.config.dictConfig(config)
    logging.captureWarnings(True)  # as Django does: a warning is an event too, not a bare line


@signals.celeryd_after_setup.connect
def _no_banner_in_json(instance: Any, **_: object) -> None:
    from django.conf import settings

    # The start-up banner is printed, not logged: in JSON it would be the only lines a log
    # collector cannot parse. The same facts are in the "ready" event.
    if settings.LOG_FORMAT == "json":
        instance.quiet = True


@signals.worker_ready.connect
def _no_shutdown_print_in_json(sender: Any, **_: object) -> None:
    from celery.apps.worker import install_worker_term_handler, install_worker_term_hard_handler
    from django.conf import settings

    if settings.LOG_FORMAT != "json":
        return
    # Celery prints "worker: Warm shutdown (MainProcess)" from its signal handlers; the same
    # handlers without the print, and the fact logged as an event (below) instead.
    worker = sender.controller
    install_worker_term_handler(worker, verbose=False)
    install_worker_term_hard_handler(worker, verbose=False)


@signals.worker_shutting_down.connect
def _log_shutdown(sig: str, how: str, **_: object) -> None:
    logging.getLogger(__name__).info("worker: %s shutdown on %s", how.lower(), sig)


@signals.worker_init.connect
def _metrics_dir_reset(**_: object) -> None:
    from portal.metrics_process import multiproc_dir_reset

    multiproc_dir_reset()  # the main process, before it forks the pool


@signals.worker_ready.connect
def _metrics_serve(sender: Any, **_: object) -> None:
    from django.conf import settings

    from portal.metrics_process import metrics_server_start

    if not settings.METRICS_PORT:
        return
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # The pool's processes would each count alone, and the main process serve nothing.
        logging.getLogger(__name__).warning(
            "PROMETHEUS_MULTIPROC_DIR is not set: the worker does not serve /metrics"
        )
        return
    metrics_server_start(what=f"celery worker {sender.hostname}")


@signals.task_prerun.connect
def _task_log_context(task_id: str, task: Any, **_: object) -> None:
    log_context.clear()  # nothing from the previous task in this process
    log_context.bind(task_id=task_id, task_name=task.name)


@signals.task_postrun.connect
def _task_log_context_end(**_: object) -> None:
    log_context.clear()


# The cluster a task is about travels with it: a task sent inside a cluster's scope (a page
# or API call with ?cluster=, a task of that cluster) runs in that scope, so the pools,
# nodes and moves it reads and the API server and Prometheus it asks are that cluster's.
CLUSTER_HEADER = "portal_cluster"


@signals.before_task_publish.connect
def _task_cluster_sent(headers: dict[str, Any] | None = None, **_: object) -> None:
    from pools.core.cluster_scope import scoped_cluster

    if headers is not None and (cluster := scoped_cluster()) is not None:
        headers[CLUSTER_HEADER] = cluster


def task_cluster(request: Any) -> str | None:
    """The cluster a task's message names, if any."""
    found = request.get(CLUSTER_HEADER)
    if found is None:
        found = (getattr(request, "headers", None) or {}).get(CLUSTER_HEADER)
    return str(found) if found else None


@signals.task_prerun.connect
def _task_cluster_scope(task: Any, **_: object) -> None:
    from pools.core.cluster_scope import cluster_enter

    # Run in place (eager), a task has its caller's scope already, and its message none.
    if (cluster := task_cluster(task.request)) is not None:
        task.request.cluster_token = cluster_enter(cluster)


@signals.task_postrun.connect
def _task_cluster_scope_end(task: Any, **_: object) -> None:
    from pools.core.cluster_scope import cluster_leave

    token = getattr(task.request, "cluster_token", None)
    if token is not None:
        task.request.cluster_token = None
        cluster_leave(token)


@signals.worker_process_init.connect
def _long_lived_objects_left_alone(**_: object) -> None:
    # Everything a pool process holds when it starts (Django, the Kubernetes client's model
    # classes, the project's modules) lives as long as the process. Left to the cyclic
    # garbage collector, every full collection walks it all again: about 0.3 s of CPU in
    # the middle of whatever task is running (one move in four, in bench.moves). Frozen,
    # the collector walks only what tasks allocate.
    gc.freeze()
