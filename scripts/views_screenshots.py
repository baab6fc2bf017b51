"""Screenshots of the report's view sections for docs/views.md (headless Chromium).

    python scripts/views_screenshots.py REPORT.html docs/img [PREFIX]

For each section the page has, a copy of the page that shows only that section is opened in
Chromium (``--headless=new``) and saved as ``PREFIX-<section>.png`` (PREFIX: ``views``), then
made smaller with optipng when it is installed (lossless).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SECTIONS = ("timeline-all", "distributed", "ops", "kernels", "queue", "critical-path", "memory",
            "python", "gpu-samples")
HEIGHT_PX = {"python": 1500}
"""Taller windows for the sections read top to bottom (the call tree); others 760 px."""


def main() -> int:
    report, out = Path(sys.argv[1]), Path(sys.argv[2])
    prefix = sys.argv[3] if len(sys.argv) > 3 else "views"
    page = report.read_text(encoding="utf-8")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium not found", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for section in [s for s in SECTIONS if f'<section id="{s}">' in page]:
            png = out / f"{prefix}-{section}.png"
            style = f"<style>body > :not(#{section}) {{ display: none }}</style></head>"
            single = Path(tmp) / f"{section}.html"
            single.write_text(page.replace("</head>", style, 1), encoding="utf-8")
            height = HEIGHT_PX.get(section, 760)
            subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", f"--window-size=1000,{height}",
                            f"--user-data-dir={tmp}/profile",
                            f"--screenshot={png}", single.as_uri()],
                           capture_output=True, timeout=120, check=True)
            if shutil.which("optipng"):
                subprocess.run(["optipng", "-quiet", "-o2", str(png)], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
