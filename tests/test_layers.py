"""The import layering: ceilings <- kernels <- advisor <- tui, and nothing imports upwards.

Every .py file of each layer is parsed (not imported) and each import it names is checked, also
imports inside functions, relative ones and `importlib.import_module("...")` with a literal name.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# What each layer may not import (top-level package names).
FORBIDDEN = {
    "ceilings": {"kernels", "advisor", "tui"},
    "kernels": {"advisor", "tui"},
    "advisor": {"tui", "textual"},
    "tui": set(),
}
BEYOND_TOP = "<beyond-top-level>"

# Inside advisor/, by job (docs/architecture.md): what each sub-package may not import.
SUB_FORBIDDEN = {
    "advisor.capture": {"advisor.model", "advisor.measure", "advisor.advice", "advisor.cli", "advisor.commands"},
    "advisor.model": {"advisor.measure", "advisor.advice", "advisor.cli", "advisor.commands"},
    "advisor.measure": {"advisor.advice", "advisor.cli", "advisor.commands"},
    "advisor.advice": {"advisor.cli", "advisor.commands"},
}


def imported_modules(source: str, package: str, filename: str = "<source>") -> set[str]:
    """Absolute names of the modules a file imports; `package` is the dotted package the file is in
    (`advisor` for advisor/cli.py, `advisor.views` for advisor/views/table.py), for relative imports."""
    found = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level > len(parts):
                    found.add(BEYOND_TOP)  # climbs out of the top-level package
                    continue
                base = parts[:len(parts) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
                # `from advisor import cli` names the module advisor.cli too (for the sub-package rules)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.add(first.value)
    return found


def violations(source: str, package: str, filename: str = "<source>") -> list[str]:
    layer = package.split(".")[0]
    room = ".".join(package.split(".")[:2])
    below = SUB_FORBIDDEN.get(room, set())
    bad = []
    for module in sorted(imported_modules(source, package, filename)):
        top = module.split(".")[0]
        if top in FORBIDDEN[layer] or top == BEYOND_TOP:
            bad.append(f"{filename}: {layer} imports {module}")
        elif any(module == f or module.startswith(f + ".") for f in below):
            bad.append(f"{filename}: {room} imports {module}")
    return bad


def layer_files(layer: str) -> list[tuple[Path, str]]:
    """(file, dotted package it is in) for every .py file under the layer's folder."""
    folder = REPO / layer
    if not folder.is_dir():
        return []
    return [(path, ".".join(path.parent.relative_to(REPO).parts)) for path in sorted(folder.rglob("*.py"))]


def test_core_layers_have_files():
    assert layer_files("ceilings"), "ceilings/ has no Python files: is the test looking in the right place?"
    assert layer_files("kernels")


def test_advisor_sub_packages_exist():
    for room in SUB_FORBIDDEN:
        assert layer_files(room.replace(".", "/")), f"{room} has no files: is the test looking in the right place?"


@pytest.mark.parametrize("package", list(FORBIDDEN) + list(SUB_FORBIDDEN))
def test_layering(package):
    bad = []
    for path, dotted in layer_files(package.replace(".", "/")):
        bad += violations(path.read_text(), dotted, str(path.relative_to(REPO)))
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


@pytest.mark.parametrize("package, source", [
    ("ceilings", "import kernels.fused_moe\n"),
    ("ceilings", "from advisor.cli import main\n"),
    ("ceilings", "def f():\n    from tui import app\n    return app\n"),
    ("ceilings", "import importlib\nmod = importlib.import_module('kernels.moe_configs')\n"),
    ("ceilings", "from .. import kernels\n"),
    ("kernels", "import numpy as np\nimport advisor\n"),
    ("kernels", "from tui.widgets import Table\n"),
    ("advisor", "from textual.app import App\n"),
    ("advisor", "import textual\n"),
    ("advisor", "try:\n    import tui.app as app\nexcept ImportError:\n    app = None\n"),
    ("advisor.views", "from ...tui import app\n"),
    ("kernels.configs", "from .. import fused_moe\nfrom advisor import cli\n"),
    ("advisor.model", "from advisor.advice.search import search\n"),
    ("advisor.model", "def f():\n    from advisor.measure import timing\n"),
    ("advisor.capture", "from advisor.model.predict import model_for\n"),
    ("advisor.capture", "from ..advice import apply\n"),
    ("advisor.measure", "from advisor import cli\n"),
])
def test_checker_flags_violations(package, source):
    assert violations(source, package)


@pytest.mark.parametrize("package, source", [
    ("ceilings", "import json\nfrom ceilings.errors import AdvisorError\nfrom . import launch\n"),
    ("kernels", "import torch\nimport triton.language as tl\nfrom ceilings.launch import Config\n"),
    ("advisor", "from kernels.moe_configs import get_config\nfrom ceilings import Config\nimport rich\n"),
    ("advisor", "import textual_lookalike\n"),
    ("advisor.views", "from .. import cli\nfrom ..report import render\nfrom . import table\n"),
    ("advisor.measure", "from advisor.model.predict import fine_tune\nfrom advisor.measure import timing\n"),
    ("advisor.advice", "from advisor.model.predict import model_for\nfrom advisor.capture.trace import read_trace\n"),
    ("advisor.model", "from ceilings.roofline import roofline\nfrom kernels.moe_bench import row_config\n"),
    ("tui", "from textual.app import App\nfrom advisor import cli\nfrom kernels import fused_moe\n"),
])
def test_checker_allows_downward_imports(package, source):
    assert violations(source, package) == []


def test_ceilings_imports_without_torch():
    """ceilings/__init__.py promises that torch is not needed to use the package."""
    code = "import sys, ceilings, ceilings.launch; sys.exit('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr or "importing ceilings imported torch"
