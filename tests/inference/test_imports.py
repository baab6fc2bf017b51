"""The inference models analyze without torch: importing them must not import it."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import importlib, pkgutil, sys
import aiprof.inference as package
for info in pkgutil.iter_modules(package.__path__):
    importlib.import_module("aiprof.inference." + info.name)
for name in ("batching", "padding", "infer_stages", "coldstart", "quantize"):
    importlib.import_module("aiprof.cli." + name)
print("torch" in sys.modules)
"""


def test_no_torch_at_import_time():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def test_public_names():
    import aiprof.inference as inference

    assert inference.DynamicBatcher.__module__ == "aiprof.inference.batcher"
    assert callable(inference.simulate) and callable(inference.analyze_padding)
