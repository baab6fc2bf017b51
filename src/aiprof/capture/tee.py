"""Copy what the script prints (``sys.stdout`` and ``sys.stderr``) into ``stdout.log``.

Python-level only: output written straight to file descriptor 1 by C code or by child
processes goes to the terminal but not to the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any, TextIO


class TeeStream:
    """A text stream that writes to the original stream and to a shared log file."""

    def __init__(self, stream: TextIO, log: IO[str]) -> None:
        self._stream = stream
        self._log = log

    def write(self, text: str) -> int:
        self._stream.write(text)
        if not self._log.closed:
            self._log.write(text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()
        if not self._log.closed:
            self._log.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer...
        return getattr(self._stream, name)


class OutputTee:
    """Installs ``TeeStream`` on ``sys.stdout``/``sys.stderr`` until ``close()``."""

    def __init__(self, path: Path) -> None:
        import sys

        self._sys = sys
        self._log = path.open("w", encoding="utf-8", errors="replace", buffering=1)
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = TeeStream(sys.stdout, self._log)
        sys.stderr = TeeStream(sys.stderr, self._log)

    def close(self) -> None:
        """Restore the original streams and close the log."""
        for stream in (self._sys.stdout, self._sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        self._sys.stdout, self._sys.stderr = self._saved
        self._log.close()
