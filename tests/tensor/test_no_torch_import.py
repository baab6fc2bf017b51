"""GIVEN a fresh interpreter WHEN every aiprof.tensor module is imported THEN torch is not:
a trace from a GPU cluster is analyzed on a laptop without torch."""

from __future__ import annotations

import subprocess
import sys

MODULES = [
    "alignment",
    "ceilings_model",
    "compute_ops",
    "costmodel",
    "dtypes",
    "flops",
    "fusion",
    "fusion_verify",
    "layout",
    "measure",
    "memory_ops",
    "memtimeline",
    "model_analysis",
    "model_loading",
    "opcall",
    "opcost",
    "reuse",
    "roofline",
    "timing",
    "trace_lints",
    "trace_ops",
    "trace_roofline",
    "capture",
]


def test_tensor_modules_do_not_import_torch() -> None:
    imports = "; ".join(f"import aiprof.tensor.{m}" for m in MODULES)
    code = f"import sys; {imports}; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
