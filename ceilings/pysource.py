"""Python source parsed one thread at a time.

CPython 3.11's AST constructor keeps its recursion depth in state shared by every thread, so two `ast.parse`
calls running at once in two threads can fail with "SystemError: AST constructor recursion depth mismatch"
(python/cpython#106905, fixed in later releases). The TUI runs the advisor's work in background threads, and the
advisor reads kernel files' source in several places: every parse of the project goes through here, under one lock.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse(source, filename, mode)`, serialised across threads."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
