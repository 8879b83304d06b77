"""structlog on stderr, configured before anything else logs.

Stdout belongs to the MCP protocol in stdio mode, so every log line of ours, of the mcp SDK and
of uvicorn goes to stderr: structlog renders, and the standard library's root logger is bridged
through ``structlog.stdlib.ProcessorFormatter`` onto the same stderr handler.
"""

from __future__ import annotations

import logging
import sys
import weakref
from typing import Literal

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(level: str = "info", fmt: Literal["json", "console"] = "json") -> None:
    """Send structlog and stdlib logging to stderr as JSON lines (or coloured console text).

    Safe to call more than once (the last call wins). ``level`` is one of debug/info/warning/error.
    """
    numeric = _LEVELS.get(level.lower(), logging.INFO)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if fmt == "console"
        else structlog.processors.JSONRenderer(ensure_ascii=False)
    )
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.format_exc_info if fmt == "json" else structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer,
        ])
    )
    for proxy in _loggers:  # forget what each logger cached of the previous configuration
        proxy.__dict__.pop("bind", None)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    # The SDK logs every request at INFO; keep it quieter unless debugging.
    if numeric > logging.DEBUG:
        for noisy in ("mcp", "httpx", "httpx2", "uvicorn.error"):
            logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))


# Every logger handed out: each caches its configuration at its first use (a lazy proxy replaces
# its own ``bind``), which configure_logging undoes, so that its last call wins for all of them.
_loggers: weakref.WeakSet[structlog.stdlib.BoundLogger] = weakref.WeakSet()


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger named ``name`` (e.g. ``graph_memory.store``)."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    _loggers.add(logger)
    return logger
