"""GIVEN a fresh interpreter WHEN every module of aiprof.tensor (the models) and of
aiprof.measure.tensor (what runs a model, importing torch inside its functions) is imported
THEN torch is not: a trace from a GPU cluster is analyzed on a laptop without torch."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import aiprof.measure.tensor
import aiprof.tensor


def _modules(package: object) -> list[str]:
    prefix = package.__name__ + "."  # type: ignore[attr-defined]
    return [prefix + m.name for m in pkgutil.iter_modules(package.__path__)]  # type: ignore[attr-defined]


def test_tensor_modules_do_not_import_torch() -> None:
    modules = _modules(aiprof.tensor) + _modules(aiprof.measure.tensor)
    assert len(modules) >= 22
    modules.append("aiprof.measure.timing")
    imports = "; ".join(f"import {m}" for m in modules)
    code = f"import sys; {imports}; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
