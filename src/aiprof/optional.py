"""Optional dependencies: the one place that imports torch on behalf of a feature and says, in
one line, how to install it when it is missing."""

from __future__ import annotations

import importlib.util
from typing import Any

from aiprof.errors import MissingDependencyError

INSTALL_TORCH = (
    "pip install 'aiprof[torch]' (or the torch build for your machine, see the README); "
    "reading and analysing traces works without it"
)


def import_torch(feature: str) -> Any:
    """``torch`` (with ``torch.profiler`` loaded), or a ``MissingDependencyError`` naming
    ``feature`` ("capture", "the demo workload", "aiprof ceilings", ...)."""
    try:
        import torch
        import torch.profiler  # noqa: F401
    except ImportError:
        raise _torch_missing(feature) from None
    return torch


def require_torch(feature: str) -> None:
    """The ``import_torch`` error when torch is not installed, without importing it: for a
    process that only starts others that will (``aiprof run --nproc`` starts torchrun, whose
    ranks import it; the 2 s of importing it here would be spent for nothing)."""
    if importlib.util.find_spec("torch") is None:
        raise _torch_missing(feature)


def _torch_missing(feature: str) -> MissingDependencyError:
    return MissingDependencyError(f"{feature} needs PyTorch: {INSTALL_TORCH}")
