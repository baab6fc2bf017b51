"""Shared fixtures: the public traces beside the checkout, and GPU skipping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PUBLIC_TRACES = Path(
    os.environ.get("AIPROF_PUBLIC_TRACES", REPO.parent / "shared" / "traces" / "public")
)
DATA = REPO / "tests" / "data"


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def public_traces() -> Path:
    if not PUBLIC_TRACES.is_dir():
        pytest.skip(f"public traces not found at {PUBLIC_TRACES}")
    return PUBLIC_TRACES
