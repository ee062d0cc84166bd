"""triton-advisor: ceilings, predictions and config advice for Triton kernels.

The Launch/Config vocabulary lives in `ceilings` (the bottom layer); it is re-exported here.
"""

from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg

__all__ = ["AdvisorError", "Config", "Launch", "TensorArg", "prune"]


def prune(top_k: int = 4, grid=None, gpu: str | None = None) -> dict:
    """`prune_configs_by=advisor.prune(top_k=4)`: the predictor picks which autotune configs get timed
    (see advisor.advice.autotune)."""
    from advisor.advice.autotune import prune as make

    return make(top_k, grid, gpu)
__version__ = "0.1.0"
