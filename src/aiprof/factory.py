"""``MODULE:FACTORY`` specs naming a user's model builder: ``pkg.models:resnet50`` or
``path/to/file.py:build``. Shared by ``aiprof model``, ``coldstart`` and ``batching bench``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from aiprof.errors import InputError


def one_line(error: BaseException) -> str:
    """``Type: first line of the message``: a user's exception as one line for the CLI."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def import_module_or_file(name: str) -> ModuleType:
    """A dotted module name, or a ``.py`` file registered under a stable module name
    (``torch.compile`` re-imports modules by name)."""
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name)
    module_name = f"aiprof_model_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise InputError(f"{name}: no such Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def resolve_factory(spec: str) -> Callable[..., Any]:
    """The callable ``spec`` names; InputError for a malformed spec or an import failure."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise InputError(f"{spec!r}: expected MODULE:FACTORY, e.g. mypkg.models:resnet50")
    try:
        factory = getattr(import_module_or_file(module_name), attr)
    except InputError:
        raise
    except Exception as error:  # the user's code: report it in one line
        raise InputError(f"cannot import {spec}: {one_line(error)}") from error
    if not callable(factory):
        raise InputError(f"{spec}: {attr} is not callable")
    made: Callable[..., Any] = factory
    return made
