"""The end of ``aiprof demo``: diagnose a trace in the terminal and write its HTML report."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from aiprof.trace import Trace, TraceSet


def render_demo_diagnosis(console: Console, trace: Trace, report_path: Path,
                          *, say_where: bool = True) -> Path:
    """Print the diagnosis of ``trace`` and write its report to ``report_path``."""
    from aiprof.diagnose.report_data import report_data
    from aiprof.report.diagnose_terminal import render_diagnosis
    from aiprof.report.html import render_report

    data = report_data(TraceSet((trace,), "single trace"), f"aiprof demo: {Path(trace.path).name}")
    render_diagnosis(console, data.diagnosis)
    report_path.write_text(render_report(data), encoding="utf-8")
    if say_where:
        console.print(f"HTML report written to {report_path}")
    return report_path
