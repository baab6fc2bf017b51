"""Open an HTML file in headless Chromium (Debian's ``chromium``); skip when it is absent."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--enable-logging=stderr", "--v=0",
    "--virtual-time-budget=3000",
]


@dataclass(frozen=True)
class PageRun:
    dom: str
    log: str

    @property
    def console_errors(self) -> list[str]:
        """Console messages and uncaught exceptions (the page logs nothing when healthy)."""
        return [line for line in self.log.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return found


def open_page(path: Path, *extra: str, fragment: str = "") -> PageRun:
    """The DOM after the page's scripts ran (``--dump-dom``) and Chromium's log; ``fragment``
    is put after ``#`` in the address."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [browser(), *FLAGS, f"--user-data-dir={profile}", *extra, "--dump-dom",
             path.resolve().as_uri() + (f"#{fragment}" if fragment else "")],
            capture_output=True, text=True, timeout=60, check=False,
        )
    return PageRun(done.stdout, done.stderr)
