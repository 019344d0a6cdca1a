"""gunicorn's logger for the portal's web processes.

The portal logs each request itself (portal.request), so its logging configuration
silences gunicorn's access logger. gunicorn still builds the access line's fields for every
request whenever a logging configuration is given (logconfig_dict), only for the logger to
drop the line; here the line is built only when the access logger would write it.
"""

from __future__ import annotations

import logging

from gunicorn import glogging


class PortalGunicornLogger(glogging.Logger):
    @property
    def access_log_enabled(self) -> bool:
        return self.access_log.isEnabledFor(logging.INFO) and super().access_log_enabled
