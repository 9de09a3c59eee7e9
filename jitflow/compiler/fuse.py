"""The kernel IR now lives in ir.py and the generic fuser in lower.py; this module keeps the
older import path working."""
from jitflow.compiler.ir import *  # noqa: F401,F403
from jitflow.compiler.ir import __all__ as _ir_all
from jitflow.compiler.lower import *  # noqa: F401,F403
from jitflow.compiler.lower import Unsupported
from jitflow.compiler.lower import __all__ as _lower_all

_Unsupported = Unsupported
__all__ = list(_ir_all) + list(_lower_all)
