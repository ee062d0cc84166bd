"""triton-advisor: ceilings, predictions and config advice for Triton kernels.

The Launch/Config vocabulary lives in `ceilings` (the bottom layer); it is re-exported here.
"""

from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg

__all__ = ["AdvisorError", "Config", "Launch", "TensorArg"]
__version__ = "0.1.0"
