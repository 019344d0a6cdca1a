"""The Celery app, configured from Django settings (namespace ``CELERY_``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Tasks that change nodes are declared with these options (see pools/tasks.py): the message
# is acknowledged only after the task returns, and a worker killed mid-task gives it back.
NODE_CHANGING_TASK_OPTIONS = {"acks_late": True, "reject_on_worker_lost": True}
