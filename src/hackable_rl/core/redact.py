"""Credentials never leave the process: every URI the project prints, logs or writes is masked.

`MLFLOW_TRACKING_URI=https://user:token@host` is how MLflow takes a server's password. The project
shows that URI in messages, warnings and run.json; `masked_uri` replaces the credentials with `***`
(`https://***@host`, `?token=***`), and the CLI masks every log line and error line the same way
(`LogMasking`), so a library's message that quotes the URI is masked too. This is the bottom floor:
it imports nothing of the package.
"""

from __future__ import annotations

import logging
import re

__all__ = ["LOG_MASKING", "LogMasking", "masked_log_handler", "masked_uri"]

# `scheme://user:password@host`: everything between `//` and `@` is a credential.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s]*@")  # up to the host's last @
_SECRET_QUERY = re.compile(r"(?P<key>[?&;](?:[^=&;\s]*(?:token|password|passwd|pwd|secret|key|auth)[^=&;\s]*)=)[^&;\s]+",
                           re.IGNORECASE)


def masked_uri(text: str) -> str:
    """`text` with the credentials of every URI in it masked: `https://***@host/`, `?token=***`.
    Every message, log line and file the project writes shows a URI this way."""
    text = _USERINFO.sub(lambda match: f"{match.group('scheme')}***@", text)
    return _SECRET_QUERY.sub(lambda match: f"{match.group('key')}***", text)


class LogMasking(logging.Filter):
    """A log filter that masks credentials in every record's message, the library's ones included."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed record: logging reports it itself
            return True
        masked = masked_uri(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


LOG_MASKING = LogMasking()


def masked_log_handler() -> logging.Handler:
    """A stderr log handler whose lines have URI credentials masked (the CLI's one handler)."""
    handler = logging.StreamHandler()
    handler.addFilter(LOG_MASKING)
    return handler
