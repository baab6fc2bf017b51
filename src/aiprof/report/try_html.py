"""The try record (``aiprof.try/1``) as an HTML fragment, shown beside the findings."""

from __future__ import annotations

from html import escape
from typing import Any

from aiprof.report.try_terminal import memory_text

_STATUS = {"not_applicable": "not applicable", "failed": "failed", "timeout": "timed out",
           "skipped": "not run"}


def _cells(fix: dict[str, Any], base_peak: int | None) -> list[str]:
    estimate = fix.get("estimated_gain_pct")
    cells = [fix["name"] + (" (edited)" if fix.get("edited") else ""),
             "-" if estimate is None else f"{estimate:.1f}%"]
    if fix["status"] != "measured":
        reason = fix.get("reason", "")
        return [*cells, "-", "-", "-", f"{_STATUS.get(fix['status'], fix['status'])}: {reason}"]
    low, high = fix["interval_pct"]
    gains = fix["round_gains_pct"]
    verdict = fix["verdict"]
    if fix.get("numerics") and fix["numerics"]["flagged"]:
        verdict += " (loss moved)"
    return [*cells, f"{fix['measured_gain_pct']:+.1f}% [{low:+.1f}, {high:+.1f}]",
            f"{min(gains):+.1f} .. {max(gains):+.1f}",
            memory_text(fix.get("peak_memory_bytes"), base_peak), verdict]


def try_fragment(document: dict[str, Any]) -> str:
    """Heading, protocol line and the table ``fix | estimated | measured | spread | memory |
    verdict``; every string from the record is escaped."""
    protocol, base = document["protocol"], document["base"]
    step = base.get("step_time_us", base.get("median_step_us"))
    line = (f"base step {step / 1000:.3f} ms ({protocol['clock']}), " if step else "") + (
        f"{protocol['rounds']} interleaved rounds of {protocol['steps']} steps after "
        f"{protocol['warmup_steps']} warm-up, one fresh process per variant; verdict: "
        f"{protocol['test']}, {protocol['confidence']:.0%} interval")
    headers = ["fix", "estimated", "measured [interval]", "spread (rounds)", "peak memory",
               "verdict"]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(cell)}</td>"
                         for cell in _cells(fix, base.get("peak_memory_bytes"))) + "</tr>"
        for fix in document.get("fixes", ()))
    notes = "".join(f"<p>not applied ({escape(item['category'])}): {escape(item['change'])}</p>"
                    for item in document.get("not_applied", ()))
    if document.get("stopped"):
        notes += f"<p>stopped early: {escape(document['stopped'])}</p>"
    return (f"<h2>Fixes measured (aiprof try)</h2><p>{escape(line)}</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{notes}")
