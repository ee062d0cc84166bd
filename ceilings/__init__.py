"""Bottom layer: the Launch/Config vocabulary and (later) hardware specs, compile and roofline.

Nothing here imports `kernels`, `advisor` or `tui`; torch is not needed to use this package.
"""

from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg

__all__ = ["AdvisorError", "Config", "Launch", "TensorArg"]
