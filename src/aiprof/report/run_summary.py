"""Terminal summary of a run record written by ``aiprof run``."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.table import Table

from aiprof.record.runrecord import RunMeta, record_files


def render_run_summary(run_dir: Path, meta: RunMeta, stream: TextIO) -> None:
    """Print where the record is, how the script ended, what was captured and the notes."""
    table = Table(title=f"run record {run_dir}", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    files = record_files(run_dir)
    capture = meta.capture
    steps = (
        f"{capture.get('num_steps_seen', 0)} seen ({capture.get('step_source') or 'none'}); "
        f"skip {capture.get('skip_steps')}, warmup {capture.get('warmup_steps')}, "
        f"active {capture.get('active_steps')}"
    )
    if capture.get("mode") == "duration":
        steps = f"duration {capture.get('duration_s')} s after {capture.get('delay_s')} s"
    rows = [
        ("ended", f"{meta.ended} (exit code {meta.exit_code})"),
        ("command", " ".join(meta.command)),
        ("ranks", str(meta.world_size)),
        ("steps", steps),
        ("gpu samples", f"{meta.samples.get('num_samples', 0)} ({meta.samples.get('source')})"),
        ("files", ", ".join(files)),
    ]
    for field, value in rows:
        table.add_row(field, value)
    for note in meta.notes:
        table.add_row("note", note)
    Console(file=stream, width=120).print(table)
