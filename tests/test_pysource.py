"""Every parse of Python source in the project goes through `ceilings.pysource.parse` (one thread at a time):
CPython 3.11 fails concurrent `ast.parse` calls with "AST constructor recursion depth mismatch" (seen in CI: the
TUI's background threads parsing a kernel file while another parsed)."""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

from ceilings import pysource

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_calls_ast_parse_directly():
    direct = [f"{path.relative_to(ROOT)}:{i}" for folder in ("advisor", "ceilings", "tui", "kernels")
              for path in (ROOT / folder).rglob("*.py") if path.name != "pysource.py"
              for i, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"\bast\.parse\(", line)]
    assert direct == [], direct


def test_parses_from_many_threads_agree():
    source = (ROOT / "kernels" / "fused_moe.py").read_text()
    expected = ast.dump(ast.parse(source))
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(ast.dump(pysource.parse(source, "fused_moe.py")))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 120 and set(results) == {expected}
