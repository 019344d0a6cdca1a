"""gunicorn's settings for the portal's web processes.

gunicorn reads ./gunicorn.conf.py from its working directory by itself (the image's /app,
the repository for the demo and the tests), so every way of starting the web gets these;
the command line still says how many workers and threads, and where to listen.

- The settings are checked in the master, before any worker starts: a configuration error
  is one line and the master stops.
- The master's own lines (booting, a worker timing out) go through the portal's handler:
  the same format (LOG_FORMAT) and the same redaction as everything else.
- Each worker freezes what it loaded for the garbage collector (post_worker_init), and logs
  a collection that pauses it long (portal.gc_pauses).
- /metrics adds up what every worker counted in PROMETHEUS_MULTIPROC_DIR; without one set,
  a directory of its own is made, or each worker would answer with its own counts only.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile

from portal.env import settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
settings_or_exit()

_made_multiproc_dir = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _made_multiproc_dir:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="portal-metrics-")

# prometheus_client picks its multiprocess mode when first imported: after the line above.
from django.conf import settings  # noqa: E402
from prometheus_client import multiprocess  # noqa: E402

from portal.gc_pauses import gc_pauses_log  # noqa: E402
from portal.metrics_process import multiproc_dir_reset  # noqa: E402

logconfig_dict = settings.LOGGING
# Builds gunicorn's access line only when something would write it (the portal writes its own).
logger_class = "portal.gunicorn_logger.PortalGunicornLogger"


def on_starting(server: object) -> None:
    multiproc_dir_reset()


def child_exit(server: object, worker: object) -> None:
    multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]


def on_exit(server: object) -> None:
    if _made_multiproc_dir:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


def post_worker_init(worker: object) -> None:
    # Everything a worker holds once the application is loaded (Django, DRF, the Kubernetes
    # client's models, the project) lives as long as the process. Left to the cyclic
    # garbage collector, every full collection walks it all again with the interpreter
    # lock held, stalling every thread of the worker mid-request; frozen, the collector
    # walks only what requests allocate.
    gc.freeze()
    gc_pauses_log(settings.GC_PAUSE_LOG_SECONDS)
