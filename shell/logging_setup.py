"""``--log-level`` and ``--log-format text|json`` for every command, configured once.

The choice is also put in the environment (``REFLEX_LOG_LEVEL``, ``REFLEX_LOG_FORMAT``), which
is how ``reflex flow``'s worker processes (``python -m bytewax.run``) get the same logging:
:func:`configure_from_env` runs where they build the flow. JSON logs are one object a line
with ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``process`` and ``message``, and
``exception`` when there is one, so a log shipper needs no parsing rules.

>>> import io, json
>>> stream = io.StringIO()
>>> configure_logging("info", "json", stream=stream)
>>> logging.getLogger("reflex.example").info("hello %s", "world")
>>> json.loads(stream.getvalue())["message"]
'hello world'
>>> reset_logging()
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import sys
from typing import TextIO

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
ENV_LEVEL, ENV_FORMAT = "REFLEX_LOG_LEVEL", "REFLEX_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record; see the module docstring for its keys."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        entry: dict[str, object] = {
            "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "process": record.process,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Replaces the root logger's handlers with one to ``stream`` (stderr), and exports the
    choice for child processes. A command's own ``logging.basicConfig`` is then a no-op."""
    if level not in LEVELS or fmt not in FORMATS:
        raise ValueError(f"log level {level!r} / format {fmt!r}: expected {LEVELS} / {FORMATS}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    os.environ[ENV_LEVEL], os.environ[ENV_FORMAT] = level, fmt


def configure_from_env(default_level: str = "info") -> None:
    """What a worker process runs: the parent's choice, else ``default_level`` as text. An
    unknown value falls back to the default, with a warning, rather than stop the flow."""
    level = os.environ.get(ENV_LEVEL, default_level).lower()
    fmt = os.environ.get(ENV_FORMAT, "text").lower()
    problems = []
    if level not in LEVELS:
        problems.append(f"{ENV_LEVEL}={level!r}")
        level = default_level
    if fmt not in FORMATS:
        problems.append(f"{ENV_FORMAT}={fmt!r}")
        fmt = "text"
    configure_logging(level, fmt)
    if problems:
        logging.getLogger(__name__).warning("ignored %s: not a known value", ", ".join(problems))


def reset_logging() -> None:
    """Back to Python's defaults (tests and doctests): no root handler, level WARNING."""
    logging.getLogger().handlers[:] = []
    logging.getLogger().setLevel(logging.WARNING)
    os.environ.pop(ENV_LEVEL, None)
    os.environ.pop(ENV_FORMAT, None)
