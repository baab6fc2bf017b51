"""Terminal rendering of an ``aiprof.try/1`` document (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from aiprof.report.terminal import text

_VERDICT_STYLE = {"faster": "bold green", "slower": "bold red", "within noise": "yellow"}
_STATUS_TEXT = {"not_applicable": "not applicable", "failed": "failed", "timeout": "timed out",
                "skipped": "not run"}
TAIL_SHOWN = 6


def _pct(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f}%" if signed else f"{value:.1f}%"


def _bytes(value: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def memory_text(peak: int | None, base: int | None) -> str:
    """``1.20 GB (-4%)``: the fix's peak and its change from the base's."""
    if peak is None:
        return "-"
    if not base:
        return _bytes(peak)
    change = round(100.0 * (peak - base) / base)
    return f"{_bytes(peak)} ({change:+d}%)" if change else f"{_bytes(peak)} (same)"


def _row(fix: dict[str, Any], base_peak: int | None) -> list[str]:
    name = ("aa (unfixed again)" if fix["name"] == "aa" and not fix.get("edited")
            else fix["name"] + (" (edited)" if fix.get("edited") else ""))
    estimated = _pct(fix.get("estimated_gain_pct"), signed=False)
    if fix["status"] != "measured":
        return [text(name), estimated, "-", "-", "-", _STATUS_TEXT.get(fix["status"],
                                                                     fix["status"])]
    low, high = fix["interval_pct"]
    gains = fix["round_gains_pct"]
    verdict = fix["verdict"]
    style = _VERDICT_STYLE.get(verdict, "")
    verdict_text = f"[{style}]{verdict}[/]" if style else verdict
    if fix.get("numerics") and fix["numerics"]["flagged"]:
        verdict_text += " [bold red]loss moved[/]"
    return [text(name), estimated, f"{fix['measured_gain_pct']:+.1f}% [{low:+.1f}, {high:+.1f}]",
            f"{min(gains):+.1f} .. {max(gains):+.1f}",
            memory_text(fix.get("peak_memory_bytes"), base_peak), verdict_text]


def _notes(fix: dict[str, Any]) -> list[str]:
    lines = []
    if fix.get("reason"):
        lines.append(text(fix["reason"]))
    if fix.get("compile_s") is not None:
        lines.append(f"compile time {fix['compile_s']:.1f} s (warm-up, not in the gain)")
    numerics = fix.get("numerics")
    if numerics:
        verb = "moved" if numerics["flagged"] else "kept"
        lines.append(f"loss {verb}: {numerics['max_rel_diff']:.2e} relative to the base's "
                     f"(tolerance {numerics['tolerance']:.2e})")
    lines.extend(text(note) for note in fix.get("notes", ()))
    lines.extend("  | " + text(line) for line in fix.get("tail", ())[-TAIL_SHOWN:]
                 if fix["status"] in ("failed", "timeout"))
    return lines


def render_try(console: Console, document: dict[str, Any]) -> None:
    """Protocol line, the table ``fix | estimated | measured | spread | memory | verdict``,
    then what each fix did or why it was not measured, and the code changes not applied."""
    protocol, base = document["protocol"], document["base"]
    clock = {"cuda_events": "CUDA events", "host": "host clock"}.get(protocol["clock"], "?")
    step = base.get("step_time_us", base["median_step_us"])
    statistic = protocol.get("statistic", "median")
    console.print(
        f"base step {step / 1000:.3f} ms ({statistic}, {clock}); " if step is not None
        else "no base step; ",
        f"{protocol['rounds']} rounds x {protocol['steps']} steps after "
        f"{protocol['warmup_steps']} warm-up, one fresh process each "
        f"({document['num_processes']} processes, {document['wall_s']:.0f} s)", sep="")
    table = Table(title="Fixes measured on the unmodified script (gain: % of step time saved)")
    for column in ("fix", "estimated", "measured [95% interval]", "spread (rounds)",
                   f"peak memory ({base.get('memory_kind') or '-'})", "verdict"):
        table.add_column(column)
    for fix in document["fixes"]:
        table.add_row(*_row(fix, base.get("peak_memory_bytes")))
    console.print(table)
    for fix in document["fixes"]:
        for line in _notes(fix):
            console.print(f"{text(fix['name'])}: {line}")
    for item in document.get("not_applied", ()):
        console.print(f"not applied ({text(item['category'])}: needs a code change): "
                      f"{text(item['change'])}; see the diagnosis")
    noise = document.get("noise")
    if noise and noise.get("half_width_pct") is not None:
        gains = noise["round_gains_pct"]
        console.print(
            f"A/A (the unfixed script against itself, {len(gains)} rounds): "
            f"{min(gains):+.1f} .. {max(gains):+.1f}%, {noise['verdict']}; a fix whose gain "
            f"is within ±{noise['half_width_pct']:.1f}% cannot be told from the noise between "
            "fresh processes here")
    probe = document.get("host_probe")
    if probe and probe.get("varies"):
        advice = ("the floor statistic drops the slowed stretches"
                  if protocol.get("statistic") == "floor"
                  else "--statistic floor and --min-timed-s 1 narrow the noise it adds")
        console.print(
            f"[yellow]the host changed speed during the trial:[/] the same pure-Python probe "
            f"took {probe['fastest_us'] / 1000:.1f}-{probe['slowest_us'] / 1000:.1f} ms "
            f"({probe['ratio']:.1f}x) across processes; host-bound steps carry that noise "
            f"({advice}; docs/try.md)")
    if document.get("stopped"):
        console.print(f"[bold]stopped early:[/] {text(document['stopped'])}; the table has "
                      "what was measured")
