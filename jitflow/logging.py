"""`tf.logging`: TF1's logging functions on the standard library's `logging` module.

Messages go to the "jitflow" logger (a stderr handler is added on first use when the
application has configured none). The default verbosity is WARN, as TF1's.
"""
from __future__ import annotations

import sys

__all__ = ["DEBUG", "INFO", "WARN", "ERROR", "FATAL", "set_verbosity", "get_verbosity",
           "debug", "info", "warn", "warning", "error", "fatal", "log", "log_if",
           "log_every_n", "log_first_n", "vlog", "flush", "get_logger"]

# the standard library's levels (imported lazily: most programs never log)
DEBUG, INFO, WARN, ERROR, FATAL = 10, 20, 30, 40, 50

_logger = None
_counts: dict = {}


def get_logger():
    """The "jitflow" logger (level WARN and a stderr handler unless configured)."""
    global _logger
    if _logger is None:
        import logging as _logging
        lg = _logging.getLogger("jitflow")
        if lg.level == _logging.NOTSET:
            lg.setLevel(WARN)
        if not lg.handlers and not _logging.getLogger().handlers:
            h = _logging.StreamHandler(sys.stderr)
            h.setFormatter(_logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
            lg.addHandler(h)
        _logger = lg
    return _logger


def set_verbosity(v: int) -> None:
    get_logger().setLevel(v)


def get_verbosity() -> int:
    return get_logger().getEffectiveLevel()


def log(level: int, msg, *args, **kwargs) -> None:
    get_logger().log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    get_logger().debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    get_logger().info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    get_logger().warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    get_logger().error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    get_logger().critical(msg, *args, **kwargs)


def log_if(level: int, msg, condition, *args) -> None:
    if condition:
        log(level, msg, *args)


def _caller_key() -> tuple:
    f = sys._getframe(2)
    return (f.f_code.co_filename, f.f_lineno)


def log_every_n(level: int, msg, n: int, *args) -> None:
    """Log on the 1st, (n+1)th, (2n+1)th, ... call from the same line."""
    key = _caller_key()
    c = _counts.get(key, 0)
    _counts[key] = c + 1
    log_if(level, msg, c % max(int(n), 1) == 0, *args)


def log_first_n(level: int, msg, n: int, *args) -> None:
    """Log only the first n calls from the same line."""
    key = _caller_key()
    c = _counts.get(key, 0)
    _counts[key] = c + 1
    log_if(level, msg, c < n, *args)


def vlog(level: int, msg, *args, **kwargs) -> None:
    get_logger().log(level, msg, *args, **kwargs)


def flush() -> None:
    for h in get_logger().handlers:
        h.flush()
