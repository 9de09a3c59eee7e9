"""`tf.app`: `tf.app.run(main=None, argv=None)` and `tf.app.flags`."""
from __future__ import annotations

import sys
from typing import Callable, Optional

from jitflow import flags

__all__ = ["run", "flags"]


def run(main: Optional[Callable] = None, argv=None):
    """Parse the flags from `argv` (default sys.argv), then `sys.exit(main(remaining argv))`;
    `main` defaults to the `main` function of the `__main__` module."""
    args = sys.argv if argv is None else list(argv)
    remaining = flags.FLAGS(args)
    if main is None:
        main = sys.modules["__main__"].main
    sys.exit(main(remaining))
