"""Diagnosis: one rule per cause turns analysis passes into ranked findings with a gain.

The vocabulary is ``aiprof.diagnose.rules.RULES`` (one module per category). Names here are
imported when first used (PEP 562, as in ``aiprof``), so reading a constant such as
``calibration.DEFAULT_OVERHEAD_US`` does not load every rule.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from aiprof.lazy import lazy_names

if TYPE_CHECKING:
    from aiprof.diagnose.context import DiagnoseOptions
    from aiprof.diagnose.engine import diagnose
    from aiprof.diagnose.finding import Diagnosis, Finding
    from aiprof.diagnose.rule import Rule

_WHERE = {
    "DiagnoseOptions": "aiprof.diagnose.context",
    "Diagnosis": "aiprof.diagnose.finding",
    "Finding": "aiprof.diagnose.finding",
    "Rule": "aiprof.diagnose.rule",
    "diagnose": "aiprof.diagnose.engine",
}


__getattr__ = lazy_names("aiprof.diagnose", _WHERE, globals())


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = ["DiagnoseOptions", "Diagnosis", "Finding", "Rule", "diagnose"]


class _CallablePackage(types.ModuleType):
    """``aiprof.diagnose`` is the library's function and this package at once: once the
    package is imported, Python binds ``aiprof.diagnose`` to it (a submodule's import sets the
    parent's attribute), so ``aiprof.diagnose(trace)`` calls the function either way."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from aiprof.diagnose.engine import diagnose as run

        return run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
