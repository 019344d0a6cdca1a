"""Hiding credentials in any text built from a URL: probe answers, page notes, settings
errors, logs.

A URL's user information (``scheme://user:password@host``) is the usual place for a
secret: ``PROMETHEUS_URL=http://user:secret@host:9090``, ``redis://:password@host``,
``https://<token>@host``. So is a ``password=``/``token=`` pair in a query string or a
libpq DSN. Every message that may contain one passes through :func:`redact_url` before an
operator, a probe or a log sees it. When in doubt it hides more: a lone user name is kept
only when it looks like an account name, not a token.
"""

from __future__ import annotations

import logging
import re

HIDDEN = "***"

# scheme://userinfo@ -- the userinfo runs to the LAST "@" before whitespace or a quote, as
# a password that contains an unescaped "@" or "/" still ends there for the reader.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^\s'\"<>]*)@")
# password=..., token=..., in a query string or a "key=value" DSN.
_SECRET_PAIR = re.compile(
    r"(?P<key>\b[\w-]*(?:password|passwd|pwd|token|secret|key)=)(?P<value>[^\s&;'\"<>]+)",
    re.IGNORECASE,
)
# An account name (postgres, portal, app_user); anything else alone before "@" is a token.
_ACCOUNT_NAME = re.compile(r"[A-Za-z_][A-Za-z_.-]{0,15}")


def _hide_userinfo(match: re.Match[str]) -> str:
    userinfo = match["userinfo"]
    user, has_password, _password = userinfo.partition(":")
    if has_password:
        shown_user = user if _ACCOUNT_NAME.fullmatch(user) or user == "" else HIDDEN
        return f"{match['scheme']}{shown_user}:{HIDDEN}@"
    if _ACCOUNT_NAME.fullmatch(user):
        return match.group(0)
    return f"{match['scheme']}{HIDDEN}@"


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message with URLs in it) with every credential replaced by
    ``***``; the scheme, host, port and path stay, so the message still says where."""
    text = _USERINFO.sub(_hide_userinfo, text)
    return _SECRET_PAIR.sub(lambda m: f"{m['key']}{HIDDEN}", text)


class RedactSecretsFilter(logging.Filter):
    """A logging filter that redacts a record's message and its traceback text, so a log
    line never carries a password from a URL (an exception message often holds one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_url(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_url(record.exc_text)
        return True
