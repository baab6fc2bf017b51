"""A package face whose names are imported when first used (PEP 562), for ``aiprof`` and
``aiprof.diagnose``: reading one constant must not load every module behind the face."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, where: Mapping[str, str], namespace: dict[str, Any],
               extra: Callable[[str], Any] | None = None) -> Callable[[str], Any]:
    """The module-level ``__getattr__`` of ``package``: ``name`` comes from the module
    ``where[name]`` and is then kept in ``namespace`` (later lookups skip the function).
    ``extra`` answers names that are computed rather than imported (or raises
    AttributeError)."""

    def __getattr__(name: str) -> Any:
        if name in where:
            value = getattr(import_module(where[name]), name)
        elif extra is not None:
            value = extra(name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return __getattr__
