"""The try record: ``try.json`` (the ``aiprof.try/1`` document) in a run directory.

``aiprof try --run-dir RUN`` and ``aiprof diagnose RUN --try`` write it beside the run's
traces; ``aiprof report RUN`` shows it beside the findings. The variants' logs and result
files are under ``try/`` next to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiprof.errors import InputError

TRY_FILE = "try.json"
TRY_DIR = "try"


def write_try_record(run_dir: Path, document: dict[str, Any]) -> Path:
    """Write ``run_dir/try.json`` atomically."""
    path = run_dir / TRY_FILE
    tmp = run_dir / f".{TRY_FILE}.tmp"
    try:
        tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as error:
        raise InputError(f"cannot write {path}: {error.strerror}") from None
    return path


def read_try_record(run_dir: Path) -> dict[str, Any] | None:
    """The try record of ``run_dir``, or None when there is none (or it is unreadable)."""
    path = Path(run_dir) / TRY_FILE
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None
