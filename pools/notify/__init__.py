"""Notifications' two outside systems: an SMTP server (through Django's e-mail backend) and
a webhook. Each call has a timeout and raises NotificationFailed, saying whether a retry may
help; the Celery tasks (pools/tasks.py) retry, a bounded number of times."""
