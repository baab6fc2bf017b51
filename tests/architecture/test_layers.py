"""The layer rules, checked on the source (docs/architecture.md).

GIVEN every module under src/aiprof WHEN its imports are read (module level and inside
functions) THEN each package imports only the packages below it in ``ALLOWED``, the table has no
cycle, and nothing under the torch-free packages imports torch.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "aiprof"

BASE = {"errors", "jsontext"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "jsontext": set(),
    "display": set(),
    "lazy": set(),
    "forked": {"errors"},
    "factory": {"errors"},
    "optional": {"errors"},
    "evaluation": BASE,
    "hardware": BASE,
    "trace": BASE | {"forked"},
    "record": BASE | {"trace"},
    "gpu": BASE | {"hardware", "trace"},
    "tensor": BASE | {"hardware", "trace"},
    "inference": BASE | {"lazy"},
    "analysis": BASE | {"forked", "gpu", "hardware", "tensor", "trace"},
    "distributed": BASE | {"analysis", "hardware", "trace"},
    "diagnose": BASE | {"analysis", "display", "distributed", "forked", "gpu", "hardware", "lazy",
                        "record", "tensor", "trace"},
    "capture": BASE | {"hardware", "optional", "record", "trace"},
    "measure": BASE | {"capture", "distributed", "factory", "forked", "gpu", "hardware",
                       "inference", "optional", "record", "tensor"},
    "trial": BASE | {"forked", "record"},
    "report": BASE | {"analysis", "capture", "diagnose", "distributed", "evaluation", "gpu",
                      "hardware", "inference", "measure", "record", "tensor", "trace", "trial"},
}
"""What each package may import; the top (``cli``, ``demo``, the package face and
``python -m aiprof``) may import all."""
TOP = {"cli", "demo", "__init__", "__main__"}
TORCH_FREE = {"errors", "jsontext", "display", "lazy", "forked", "hardware", "trace", "record",
              "gpu", "tensor", "inference", "analysis", "distributed", "diagnose", "report",
              "evaluation", "trial"}
"""Packages that never import torch: a trace from a GPU cluster is analyzed on a laptop."""


def _package(path: Path) -> str:
    parts = path.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


@cache
def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


MODULES = sorted(SRC.rglob("*.py"))


def test_every_package_has_a_place_in_the_table() -> None:
    packages = {_package(path) for path in MODULES}
    assert packages - set(ALLOWED) - TOP == set(), "add new packages to ALLOWED"


def test_the_table_has_no_cycle() -> None:
    state: dict[str, str] = {}

    def visit(name: str, trail: tuple[str, ...]) -> None:
        assert state.get(name) != "open", f"cycle: {' -> '.join(trail + (name,))}"
        if state.get(name) == "done":
            return
        state[name] = "open"
        for below in ALLOWED[name]:
            visit(below, trail + (name,))
        state[name] = "done"

    for name in ALLOWED:
        visit(name, ())


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_go_down_the_layers(path: Path) -> None:
    package = _package(path)
    if package in TOP:
        return
    wrong = []
    for line, module in _imports(path):
        parts = module.split(".")
        if parts[0] != "aiprof" or len(parts) < 2 or parts[1] == package:
            continue
        if parts[1] not in ALLOWED[package]:
            wrong.append(f"line {line}: {module}")
    assert not wrong, f"{package}/ imports above or beside itself: {wrong}"


@pytest.mark.parametrize(
    "path", [p for p in MODULES if _package(p) in TORCH_FREE],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_torch_free_packages_do_not_import_torch(path: Path) -> None:
    wrong = [f"line {line}: {module}" for line, module in _imports(path)
             if module.split(".")[0] in {"torch", "torchvision", "pynvml"}]
    assert not wrong, f"{path.relative_to(SRC)} imports torch or NVML: {wrong}"
