import os

from django.core.wsgi import get_wsgi_application

from portal.env import settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
# Exit status 4 is gunicorn's "app failed to load": the master stops instead of booting
# worker after worker into the same configuration error.
settings_or_exit(exit_code=4)
application = get_wsgi_application()
