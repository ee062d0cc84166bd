"""Trip counts of a kernel's loops, from its Triton IR evaluated on a launch's scalar arguments.

Only scalar integer arithmetic is evaluated (`arith` constants, +, -, *, /, %, min/max, casts,
compares, selects); anything that depends on a memory load or on an unknown value (a program id,
unless one is given) makes the bound unknown. Loops are returned in textual order, which is the
pre-order of the loop nest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

_FUNC = re.compile(r"tt\.func\s+(?:public\s+)?@(?P<name>[\w$.]+)\((?P<args>.*)\)\s*(?:->.*)?attributes|"
                   r"tt\.func\s+(?:public\s+)?@(?P<name2>[\w$.]+)\((?P<args2>.*)\)\s*\{")
_ARG = re.compile(r"%(?P<name>[\w$.]+)\s*:\s*(?P<type>[^,()]+?)(?:\s+loc\(|,|$)")
_DEF = re.compile(r"^\s*%(?P<res>[\w$.]+)(?::\d+)?\s*=\s*(?P<op>[\w.]+)\s*(?P<rest>.*)$")
_VALUE = re.compile(r"%[\w$.]+")
_FOR = re.compile(r"scf\.for\s+%[\w$.]+\s*=\s*(?P<lb>%[\w$.]+)\s+to\s+(?P<ub>%[\w$.]+)\s+step\s+(?P<step>%[\w$.]+)")


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


_BINARY = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
    "arith.divsi": _c_div, "arith.divui": lambda a, b: a // b,
    "arith.remsi": lambda a, b: a - _c_div(a, b) * b, "arith.remui": lambda a, b: a % b,
    "arith.ceildivsi": lambda a, b: -((-a) // b), "arith.ceildivui": lambda a, b: -((-a) // b),
    "arith.floordivsi": lambda a, b: a // b,
    "arith.maxsi": max, "arith.maxui": max, "arith.minsi": min, "arith.minui": min,
    "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b, "arith.xori": lambda a, b: a ^ b,
    "arith.shli": lambda a, b: a << b, "arith.shrsi": lambda a, b: a >> b, "arith.shrui": lambda a, b: a >> b,
}
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
        "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
        "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
        "uge": lambda a, b: a >= b}
_CASTS = {"arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui"}


def function_arguments(ir: str) -> list[str]:
    """Names of the kernel function's arguments, in order (constexpr-folded ones are absent)."""
    for line in ir.splitlines():
        if "tt.func" in line and "public" in line:
            inside = line[line.index("(") + 1: line.rindex(")")]
            return [m.group("name") for m in _ARG.finditer(inside)]
    return []


def loop_trip_counts(ir: str, scalars: Mapping[str, object], program_id: Mapping[str, int] | None = None
                     ) -> list[int | None]:
    """Trip count of every `scf.for` of the public kernel function, in textual order (None: unknown)."""
    env: dict[str, int | bool | None] = {}
    for name in function_arguments(ir):
        value = scalars.get(name)
        env[name] = value if isinstance(value, int | bool) else None
    trips: list[int | None] = []
    in_kernel = False
    for line in ir.splitlines():
        if "tt.func" in line:
            in_kernel = "public" in line
            continue
        if not in_kernel:
            continue
        loop = _FOR.search(line)
        if loop:
            lb, ub, step = (env.get(loop.group(k)[1:]) for k in ("lb", "ub", "step"))
            ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (lb, ub, step)) and step
            trips.append(max(0, math.ceil((ub - lb) / step)) if ok else None)
            continue
        m = _DEF.match(line)
        if m:
            env[m.group("res")] = _evaluate(m.group("op"), m.group("rest"), env, program_id)
    return trips


def _evaluate(op: str, rest: str, env: Mapping[str, object], program_id: Mapping[str, int] | None):
    body = rest.split(" loc(")[0]
    if op == "arith.constant":
        if "dense<" in body or "tensor<" in body:
            return None
        token = body.split(":")[0].strip()
        if token in ("true", "false"):
            return token == "true"
        try:
            return int(token)
        except ValueError:
            return None
    if op == "tt.get_program_id":
        axis = body.split(":")[0].strip()
        return None if program_id is None else program_id.get(axis)
    if ":" in body and "tensor<" in body.split(":", 1)[1]:
        return None
    operands = [env.get(v[1:]) for v in _VALUE.findall(body.split(":")[0])]
    if any(o is None for o in operands):
        return None
    if op in _BINARY and len(operands) == 2:
        try:
            return _BINARY[op](int(operands[0]), int(operands[1]))
        except ZeroDivisionError:
            return None
    if op in _CASTS and len(operands) == 1:
        return operands[0]
    if op == "arith.cmpi" and len(operands) == 2:
        predicate = body.split(",")[0].strip()
        return _CMP[predicate](operands[0], operands[1]) if predicate in _CMP else None
    if op == "arith.select" and len(operands) == 3:
        return operands[1] if operands[0] else operands[2]
    return None
