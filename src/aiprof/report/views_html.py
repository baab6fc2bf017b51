"""The report's sections for the views: ops, kernels, launch queue, critical path, memory,
Python, GPU samples, and with several ranks every rank compared. Only renders
``ReportViews``; every trace string goes through ``escape``.

With several ranks each section holds one pane per rank and a picker above them shows one
rank or all (``#rank=N`` or ``#rank=all`` in the address picks it too); the timeline has every
rank in one, and the distributed section the critical path across the ranks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

from aiprof.analysis.critical_join import JOINED_BOUNDS
from aiprof.analysis.critical_path import BOUNDS
from aiprof.analysis.views import Curve, RankViews, ReportViews
from aiprof.report.svg import Series, line_chart
from aiprof.report.terminal import duration
from aiprof.report.timeline_html import timeline_section

ROWS = 20
PICKER_SCRIPT = """
(function(){var pick=document.getElementById('rank-pick');if(!pick){return;}
function show(v){var panes=document.querySelectorAll('.rank-pane');
  for(var i=0;i<panes.length;i++){var p=panes[i];
    p.hidden=!(v==='all'||p.getAttribute('data-rank')===v);}
  pick.value=v;document.body.setAttribute('data-rank-shown',v);}
var m=/rank=([0-9]+|all)/.exec(location.hash||'');
var ok=m&&pick.querySelector('option[value="'+m[1]+'"]');
show(ok?m[1]:pick.options[1].value);
pick.addEventListener('change',function(){show(pick.value);});})();
"""


def view_sections(views: ReportViews) -> str:
    """Every section, each under its own ``<h2>`` with an ``id`` to link to."""
    multi = len(views.ranks) > 1

    def panes(render: Callable[[RankViews], str]) -> str:
        return "".join(_pane(v, render(v), multi) for v in views.ranks)

    return "\n".join([
        timeline_section(views.timeline),
        _picker(views) if multi else "",
        _distributed(views) if multi else "",
        _section("ops", "Operators", panes(_ops)),
        _section("kernels", "Kernels", panes(_kernels)),
        _section("queue", "Launch queue", panes(_queue)),
        _section("critical-path", "Critical path", panes(_critical)),
        _section("memory", "Memory", panes(_memory)),
        _section("python", "Python", panes(_python)),
        _section("gpu-samples", "GPU samples", panes(_samples)),
        f"<script>{PICKER_SCRIPT}</script>" if multi else "",
    ])


def _pane(v: RankViews, body: str, multi: bool) -> str:
    if not multi:
        return body
    return f'<div class="rank-pane" data-rank="{v.rank}"><h3>rank {v.rank}</h3>{body}</div>'


def _picker(views: ReportViews) -> str:
    options = "".join(f'<option value="{v.rank}">rank {v.rank}</option>' for v in views.ranks)
    return ('<div class="controls" id="rank-picker">sections below, for: '
            f'<select id="rank-pick"><option value="all">all ranks</option>{options}</select>'
            "</div>")


def _distributed(views: ReportViews) -> str:
    rows = [[str(r.rank), duration(r.self_cpu_us), duration(r.kernel_us),
             f"{r.tensor_core_pct:.1f}", duration(r.critical_path_us), escape(r.critical_bound),
             duration(r.across_path_us),
             f"{r.memory_peak_bytes / 2**20:,.1f}" if r.memory_peak_bytes else "",
             "" if math.isnan(r.gpu_util_mean_pct) else f"{r.gpu_util_mean_pct:.1f}"]
            for r in views.rows]
    table = _table(["rank", "self CPU in ops", "kernels", "tensor cores %", "own critical path",
                    "bound mostly by", "on the path across ranks", "memory peak MiB",
                    "SM util % (NVML)"], rows)
    return _section("distributed", "Distributed: every rank", table + _across(views))


def _across(views: ReportViews) -> str:
    cp = views.across
    if cp is None:
        return f"<p>No critical path across the ranks: {escape(views.across_error or '')}</p>"
    head = (f"<h3>Critical path across the ranks</h3><p>{escape(cp.window)} of every rank, "
            f"joined at {cp.num_joined:,} collectives (last rank to enter: "
            f"{escape(cp.last_by)}; {cp.num_unjoined:,} collective spans left on their rank): "
            f"{duration(cp.length_us)}, in {len(cp.stretches):,} "
            f"{'stretch' if len(cp.stretches) == 1 else 'stretches'} (rank to rank).</p>")
    stretches = [[str(s.rank), duration(s.start_us), duration(s.end_us),
                  duration(s.length_us), f"{s.num_edges:,}", escape(s.top_name)]
                 for s in cp.stretches[:ROWS]]
    bounds = [[escape(b), duration(cp.by_bound_us[b]), f"{cp.pct(b):.1f}"]
              for b in JOINED_BOUNDS if cp.by_bound_us[b] > 0]
    return (head + _table(["rank", "from", "to", "path time", "edges", "most time in"],
                          stretches)
            + _table(["bound by", "time", "% of path"], bounds))


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{body}</section>'


def _table(headers: Sequence[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _chart(curves: list[Curve], title: str, x_label: str, y_label: str, scale: float = 1.0,
           kind: str = "line") -> str:
    series = [Series(c.name, (c.xs / 1000.0).tolist(), (c.ys * scale).tolist(), kind)  # type: ignore[arg-type]
              for c in curves if len(c.xs)]
    if not series:
        return ""
    svg = line_chart(series, title=title, x_label=x_label, y_label=y_label, width=860,
                     height=320)
    return f"<div class=chart>{svg}</div>"


def _ops(v: RankViews) -> str:
    rows = [[escape(r.name), escape(r.kind), f"{r.count:,}", duration(r.self_cpu_us),
             duration(r.total_cpu_us), duration(r.self_gpu_us), duration(r.total_gpu_us)]
            for r in v.ops.rows[:ROWS]]
    note = "<p>Self and total CPU time of every CPU span, and the GPU time of what each launched " \
           "(as torch.profiler's key_averages()); aiprof ops --by-shape groups by shapes.</p>"
    return note + _table(
        ["op", "kind", "calls", "self CPU", "total CPU", "self GPU", "total GPU"], rows)


def _kernels(v: RankViews) -> str:
    k = v.kernels
    head = (f"<p>Kernels {duration(k.kernel_us)}; on tensor cores {duration(k.tensor_core_us)}"
            f" ({k.tensor_core_pct:.1f}% of kernel time, {k.tensor_core_pct_of_math:.1f}% of "
            "GEMM/conv/attention time; judged by kernel name).</p>")
    rows = [[escape(r.name), f"{r.count:,}", duration(r.total_us), duration(r.mean_us),
             f"{r.pct:.1f}", "yes" if r.tensor_core else "no"] for r in k.rows[:ROWS]]
    return head + _table(
        ["kernel", "calls", "total", "mean", "% of kernel time", "tensor cores"], rows)


def _queue(v: RankViews) -> str:
    rows = [[str(s.device), str(s.stream), f"{s.num_ops:,}", f"{s.time_mean:.2f}",
             f"{s.hta_max:.0f}", f"{s.empty_pct:.1f}", f"{s.empty_idle_pct:.1f}"]
            for s in v.queue.streams]
    chart = _chart(v.queue_curves, "Launch queue over the steps", "time (ms)", "ops queued",
                   kind="step")
    return chart + _table(
        ["device", "stream", "ops", "mean (time)", "max", "empty %", "empty and idle %"], rows)


def _critical(v: RankViews) -> str:
    cp = v.critical
    if cp is None:
        reason = escape(v.critical_error or "")
        return f"<p>{reason}</p>"
    head = (f"<p>{escape(cp.window)}: window {duration(cp.window_us)}, critical path "
            f"{duration(cp.length_us)}.</p>")
    bounds = [[escape(b), duration(cp.by_bound_us[b]), f"{cp.pct(b):.1f}"] for b in BOUNDS]
    ops = [[escape(o.name or "(launch to start)"), escape(o.bound_by), duration(o.time_us)]
           for o in cp.ops[:ROWS]]
    return (head + _table(["bound by", "time", "% of path"], bounds)
            + _table(["on the path", "bound by", "time"], ops))


def _memory(v: RankViews) -> str:
    if not v.memory.devices:
        return "<p>No allocator events: record with profile_memory=True.</p>"
    parts = [_chart(v.memory_curves, "Live memory", "time (ms)", "MiB", scale=2.0**-20,
                    kind="step")]
    for d in v.memory.devices:
        stack = " &gt; ".join(escape(n) for n in d.ops_at_peak) or "no op"
        parts.append(f"<p>{escape(d.label)}: peak "
                     f"{d.peak_bytes / 2**20:,.1f} MiB at {duration(d.peak_us)}, "
                     f"{d.num_alive_at_peak:,} blocks alive; running then: {stack}.</p>")
        rows = [[escape(o.name), f"{o.num_allocations:,}", f"{o.allocated_bytes / 2**20:,.2f}",
                 f"{o.net_bytes / 2**20:,.2f}", f"{o.alive_at_peak_bytes / 2**20:,.2f}"]
                for o in d.ops[:ROWS]]
        parts.append(_table(["op", "allocs", "allocated MiB", "net MiB", "alive at peak MiB"],
                            rows))
    return "".join(parts)


def _python(v: RankViews) -> str:
    tree = v.python
    if not tree.nodes:
        return ("<p>No Python frames: record with with_stack=True "
                "(aiprof run --with-stack).</p>")
    total = tree.total_cpu_us or 1.0
    rows = [[f'<span style="padding-left:{n.depth}em">{escape(n.name)}</span>', f"{n.count:,}",
             duration(n.total_cpu_us), duration(n.self_cpu_us), duration(n.total_gpu_us)]
            for n in tree.nodes if 100.0 * n.total_cpu_us / total >= 1.0][:60]
    return _table(
        ["function (call tree)", "calls", "total CPU", "self CPU", "GPU launched"], rows)


def _samples(v: RankViews) -> str:
    if v.samples is None:
        return "<p>No NVML samples: report on a run record written by aiprof run.</p>"
    parts = [_chart(v.sample_curves, "NVML utilization", "time (ms)", "%")]
    for d in v.samples.devices:
        rows = [[str(n), str(int(c)), *(f"{d.step_means[m][i]:,.1f}" for m in
                                        ("gpu_util_pct", "mem_util_pct", "power_w",
                                         "sm_clock_mhz"))]
                for i, (n, c) in enumerate(zip(d.step_number.tolist(),
                                               d.step_num_samples.tolist(), strict=True))]
        parts.append(_table(["step", "samples", "SM util %", "mem util %", "power W", "SM MHz"],
                            rows))
    return "".join(parts)
