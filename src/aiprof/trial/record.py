"""The try record: ``try/record.json`` (the ``aiprof.try/1`` document) in a run directory.

``aiprof try --run-dir RUN`` and ``aiprof diagnose RUN --try`` write it into the run record;
``aiprof report RUN`` shows it beside the findings. It lives in the ``try/`` folder, with
the variants' logs (``r<round>-<variant>.log``) and result files, because the trace reader
takes every ``*.json`` at the top of a run directory for a trace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiprof.errors import InputError

TRY_DIR = "try"
TRY_FILE = "record.json"


def write_try_record(run_dir: Path, document: dict[str, Any]) -> Path:
    """Write ``run_dir/try/record.json`` atomically."""
    (run_dir / TRY_DIR).mkdir(parents=True, exist_ok=True)
    path = run_dir / TRY_DIR / TRY_FILE
    tmp = run_dir / TRY_DIR / f".{TRY_FILE}.tmp"
    try:
        tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as error:
        raise InputError(f"cannot write {path}: {error.strerror}") from None
    return path


def read_try_record(run_dir: Path) -> dict[str, Any] | None:
    """The try record of ``run_dir``, or None when there is none (or it is unreadable)."""
    path = Path(run_dir) / TRY_DIR / TRY_FILE
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None
