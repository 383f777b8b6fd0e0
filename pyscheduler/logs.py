"""Logging set-up: structlog, rendered for people on a terminal and as JSON lines otherwise.

Every module logs through ``structlog.get_logger(<module name>)`` with key/value context; this
module decides only how records are rendered and which level passes.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

__all__ = ["configure_logging"]

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}


def configure_logging(level: str = "info", *, json: bool | None = None,
                      stream: TextIO | None = None) -> None:
    """Configure structlog (and the stdlib root logger that libraries use).

    ``json=None`` picks the console renderer when ``stream`` is a TTY and JSON otherwise.
    """
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    out = stream or sys.stderr
    use_json = (not out.isatty()) if json is None else json
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json
        else structlog.dev.ConsoleRenderer(colors=out.isatty()))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=max(LEVELS[level], logging.WARNING), stream=out,
                        format="%(levelname)s %(name)s: %(message)s")
