"""The Celery app, configured from Django settings (namespace ``CELERY_``)."""

import os

from celery import Celery

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

# Tasks that change nodes are declared with these options (see pools/tasks.py): the message
# is acknowledged only after the task returns, and a worker killed mid-task gives it back.
NODE_CHANGING_TASK_OPTIONS = {"acks_late": True, "reject_on_worker_lost": True}
