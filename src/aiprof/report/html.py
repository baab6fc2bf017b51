"""The self-contained HTML report (``aiprof report``) and the Jupyter fragment.

Only renders ``ReportData`` / ``Diagnosis``: every string from a trace goes through
``html.escape``; the timeline's data is JSON with ``<``, ``>`` and ``&`` escaped as
``\\u003c`` ... inside a non-executable ``application/json`` block.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from aiprof.analysis.step_breakdown import CATEGORIES
from aiprof.analysis.views import ReportViews
from aiprof.diagnose.finding import Diagnosis, Finding
from aiprof.diagnose.report_data import RankView, ReportData
from aiprof.jsontext import dumps
from aiprof.record.runrecord import RunMeta
from aiprof.report.html_assets import CSS, JS
from aiprof.report.profiler_text import profiler_line
from aiprof.report.roofline_svg import roofline_svg
from aiprof.report.run_html import run_record_html
from aiprof.report.try_html import try_fragment
from aiprof.report.views_html import view_sections

_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#999")


def render_report(data: ReportData, views: ReportViews | None = None,
                  run_meta: RunMeta | None = None) -> str:
    """The whole page as one string (with the sections of ``views`` when given; ``run_meta``:
    the run record the traces came from)."""
    rank = data.ranks[0]
    body = [
        f"<h1>{escape(data.title)}</h1>",
        _overview(data),
        run_record_html(run_meta) if run_meta is not None else "",
        "<h2>Findings</h2>",
        diagnosis_fragment(data.diagnosis),
        try_fragment(data.trial) if data.trial else "",
        _ranks_table(data) if len(data.ranks) > 1 else "",
        f"<h2>GPU timeline of step {rank.step_number} (rank {rank.summary.rank})</h2>",
        _timeline(rank),
        "<h2>Idle time per stream</h2>",
        _idle(rank),
        "<h2>Top kernels</h2>",
        _name_table(rank.summary.top_kernels, "% of kernel time"),
        "<h2>Top CPU ops</h2>",
        _name_table(rank.summary.top_ops, "% of step"),
        _occupancy(rank),
        _roofline(rank),
        view_sections(views) if views is not None else "",
    ]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(data.title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + f"<script>{JS}</script></body></html>\n"
    )


def diagnosis_fragment(diagnosis: Diagnosis) -> str:
    """Findings and verdict as an HTML fragment (also ``Diagnosis._repr_html_``)."""
    parts = [f"<div class=\"verdict\">{escape(diagnosis.verdict)}</div>"]
    if diagnosis.profiler:
        parts.append(f"<p class=\"profiler\">{escape(profiler_line(diagnosis.profiler))}</p>")
    if diagnosis.findings:
        rows = "".join(
            f"<tr><td class=num>{f.rank}</td><td>{escape(f.label)}</td>"
            f"<td class=\"sev-{f.severity}\">{f.severity}</td>"
            f"<td class=num>{f.estimated_gain_pct:.1f}</td>"
            f"<td class=num>{f.estimated_gain_ms_per_step:.3f}</td><td>{escape(f.title)}</td></tr>"
            for f in diagnosis.findings
        )
        parts.append(_table(["#", "category", "severity", "est. gain %", "ms/step", "finding"],
                            rows))
        parts.extend(_finding(f) for f in diagnosis.findings)
    parts.extend(f"<p>note: {escape(n)}</p>" for n in diagnosis.notes)
    return "\n".join(parts)


def _finding(f: Finding) -> str:
    return (
        f"<div class=\"finding\"><h3>{f.rank}. {escape(f.label)}: {escape(f.title)}</h3>"
        f"<p><b>Fix:</b> {escape(f.fix)}</p><p><b>Gain model:</b> {escape(f.model)}</p>"
        f"<details><summary>Evidence</summary><pre>{escape(dumps(f.evidence))}</pre></details>"
        "</div>"
    )


def _table(headers: list[str], rows: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table class=\"sortable\"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _overview(data: ReportData) -> str:
    s = data.ranks[0].summary
    facts = [
        ("device", s.device or "no GPU"), ("ranks", str(len(data.ranks))),
        ("steps", f"{s.num_steps} (from {s.step_source})"),
        ("step time (mean)", f"{s.step_time.mean_us / 1000:.2f} ms"),
        ("GPU busy", f"{s.gpu_busy_pct:.1f}%"), ("events", f"{s.num_events:,}"),
    ]
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    bars, legend = [], []
    for i, category in enumerate(CATEGORIES):
        pct = s.steps.pct(category)
        color = _COLORS[i % len(_COLORS)]
        bars.append(f"<div style=\"width:{pct:.3f}%;background:{color}\" "
                    f"title=\"{escape(category)} {pct:.1f}%\"></div>")
        legend.append(f"<span><i class=\"sw\" style=\"background:{color}\"></i>"
                      f"{escape(category)} {pct:.1f}%</span>")
    return (f"<h2>Overview</h2><table>{rows}</table><h3>Step time by category</h3>"
            f"<div class=\"bar\">{''.join(bars)}</div><p class=\"legend\">{''.join(legend)}</p>")


def _ranks_table(data: ReportData) -> str:
    rows = "".join(
        f"<tr><td class=num>{r.summary.rank}</td>"
        f"<td class=num>{r.summary.step_time.mean_us / 1000:.2f}</td>"
        f"<td class=num>{r.summary.gpu_busy_pct:.1f}</td>"
        f"<td class=num>{r.summary.temporal.communication_us / 1000:.2f}</td></tr>"
        for r in data.ranks
    )
    return "<h2>Ranks</h2>" + _table(
        ["rank", "step ms", "GPU busy %", "exposed comm ms"], rows)


def _timeline(rank: RankView) -> str:
    payload: dict[str, Any] = {
        "step_us": rank.step_us,
        "ops": [{"start_us": o.start_us, "dur_us": o.dur_us, "lane": o.lane, "name": o.name,
                 "kind": o.kind} for o in rank.timeline],
    }
    text = json.dumps(payload, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (
        "<div class=\"controls\"><button id=\"zoom-in\">zoom in</button>"
        "<button id=\"zoom-out\">zoom out</button><button id=\"zoom-reset\">whole step</button>"
        " (mouse wheel zooms; hover a bar for its kernel)</div>"
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\"></svg>"
        f"<script type=\"application/json\" id=\"timeline-data\">{text}</script>"
    )


def _idle(rank: RankView) -> str:
    rows = "".join(
        f"<tr><td>{s.device}</td><td>{s.stream}</td><td class=num>{s.num_ops}</td>"
        f"<td class=num>{s.busy_us / 1000:.2f}</td><td class=num>{s.idle_pct:.1f}</td>"
        f"<td class=num>{s.host_wait_us / 1000:.2f}</td>"
        f"<td class=num>{s.kernel_wait_us / 1000:.2f}</td>"
        f"<td class=num>{s.other_us / 1000:.2f}</td></tr>"
        for s in rank.idle.streams
    )
    return _table(["device", "stream", "ops", "busy ms", "idle %", "host-wait ms",
                   "kernel-wait ms", "other ms"], rows)


def _name_table(items: list[Any], pct_label: str) -> str:
    rows = "".join(
        f"<tr><td class=name>{escape(t.name)}</td><td class=num>{t.count}</td>"
        f"<td class=num data-v=\"{t.total_us:.3f}\">{t.total_us / 1000:.3f}</td>"
        f"<td class=num>{t.mean_us:.1f}</td><td class=num>{t.pct:.1f}</td></tr>"
        for t in items
    )
    return _table(["name", "count", "total ms", "mean µs", pct_label], rows)


def _occupancy(rank: RankView) -> str:
    occ = rank.occupancy
    if not occ.supported:
        return "<h2>Occupancy</h2><p>No occupancy model for this device.</p>"
    rows = "".join(
        f"<tr><td>{escape(k)}</td><td class=num>{v / 1000:.3f}</td></tr>"
        for k, v in sorted(occ.limiter_us.items(), key=lambda kv: -kv[1])
    )
    return (
        f"<h2>Occupancy</h2><p>{occ.num_sms} SMs; time-weighted theoretical occupancy "
        f"{occ.time_weighted_occupancy_pct:.1f}%; {occ.small_grid_us / 1000:.2f} ms in kernels "
        "with fewer blocks than SMs.</p>" + _table(["limiter", "kernel ms"], rows)
    )


def _roofline(rank: RankView) -> str:
    roof = rank.roofline
    if roof is None:
        return ("<h2>Roofline</h2><p>No roofline: the trace has no shapes (record_shapes) or "
                "no known GPU.</p>")
    svg = roofline_svg([r.point for r in roof.rows], roof.ceilings,
                       title=f"ops on the {roof.device} roofline")
    rows = "".join(
        f"<tr><td class=name>{escape(r.op)}</td><td class=name>{escape(r.shapes)}</td>"
        f"<td>{escape(r.dtypes)}</td><td class=num>{r.num_calls}</td>"
        f"<td class=num>{(r.point.measured_us or 0.0) / 1000:.3f}</td>"
        f"<td class=num>{(r.point.time_lost_us or 0.0) / 1000:.3f}</td>"
        f"<td>{escape(r.point.bound)}</td></tr>"
        for r in roof.rows[:15]
    )
    table = _table(["op", "shapes", "dtypes", "calls", "device ms", "ms lost to the roof",
                    "bound"], rows)
    return f"<h2>Roofline</h2><div>{svg}</div>{table}"
