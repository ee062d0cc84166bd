"""Integer and pointer values of Triton IR, shared by the scalar evaluation (`ceilings.ttir_eval`) and the
1-D tensor one (`ceilings.ttir_lanes`): the arith ops evaluated, as numpy functions."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# One op of the IR text: `%res = op rest` (SSA names may hold '-': MLIR's id-punct names a constant -1 `%c-1_i32`)
# or a statement `op rest` (a store, a yield).
DEF = re.compile(r"^\s*%(?P<res>[\w$.-]+)(?::\d+)?\s*=\s*(?P<op>[\w.\"]+)\s*(?P<rest>.*)$")
STMT = re.compile(r"^\s*(?P<op>[a-z_]+\.[\w.]+)\s*(?P<rest>.*)$")
VALUE = re.compile(r"%[\w$.#-]+")
ITER_ARGS = re.compile(r"%(?P<arg>[\w$.-]+)\s*=\s*(?P<init>%[\w$.#-]+)")


def parse_op(text: str) -> tuple[str | None, str, str | None]:
    """(op, the text after it, result name) of one IR line; op None where the line is no op."""
    m = DEF.match(text)
    if m:
        return m.group("op").strip('"'), m.group("rest"), m.group("res")
    s = STMT.match(text)
    return (s.group("op").strip('"'), s.group("rest"), None) if s else (None, "", None)


@dataclass(frozen=True)
class Pointer:
    argument: str
    offset: np.ndarray | None  # elements from the argument's data pointer


def _c_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b > 0), q, -q)


BINARY = {
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
    "arith.divsi": _c_div, "arith.divui": np.floor_divide,
    "arith.remsi": lambda a, b: a - _c_div(a, b) * b, "arith.remui": np.remainder,
    "arith.ceildivsi": lambda a, b: -((-a) // b), "arith.ceildivui": lambda a, b: -((-a) // b),
    "arith.floordivsi": np.floor_divide,
    "arith.maxsi": np.maximum, "arith.maxui": np.maximum, "arith.minsi": np.minimum, "arith.minui": np.minimum,
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "arith.shli": np.left_shift, "arith.shrsi": np.right_shift, "arith.shrui": np.right_shift,
}
DIVIDING = {"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivsi", "arith.ceildivui",
             "arith.floordivsi"}
CMP = {"eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal, "sgt": np.greater,
        "sge": np.greater_equal, "ult": np.less, "ule": np.less_equal, "ugt": np.greater, "uge": np.greater_equal}
LOGICAL = {"arith.andi": np.logical_and, "arith.ori": np.logical_or, "arith.xori": np.logical_xor}
CASTS = {"arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui"}
