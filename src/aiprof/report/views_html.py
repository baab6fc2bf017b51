"""The report's sections for the views: ops, kernels, launch queue, critical path, memory,
Python, GPU samples. Only renders ``RankViews``; every trace string goes through ``escape``."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from aiprof.analysis.critical_path import BOUNDS
from aiprof.analysis.views import Curve, RankViews
from aiprof.report.svg import Series, line_chart
from aiprof.report.terminal import duration
from aiprof.report.timeline_html import timeline_section

ROWS = 20


def view_sections(views: RankViews) -> str:
    """Every section, each under its own ``<h2>`` with an ``id`` to link to."""
    return "\n".join([timeline_section(views.timeline), _ops(views), _kernels(views),
                      _queue(views), _critical(views), _memory(views), _python(views),
                      _samples(views)])


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
    return _section("ops", "Operators", note + _table(
        ["op", "kind", "calls", "self CPU", "total CPU", "self GPU", "total GPU"], rows))


def _kernels(v: RankViews) -> str:
    k = v.kernels
    head = (f"<p>Kernels {duration(k.kernel_us)}; on tensor cores {duration(k.tensor_core_us)}"
            f" ({k.tensor_core_pct:.1f}% of kernel time, {k.tensor_core_pct_of_math:.1f}% of "
            "GEMM/conv/attention time; judged by kernel name).</p>")
    rows = [[escape(r.name), f"{r.count:,}", duration(r.total_us), duration(r.mean_us),
             f"{r.pct:.1f}", "yes" if r.tensor_core else "no"] for r in k.rows[:ROWS]]
    return _section("kernels", "Kernels", head + _table(
        ["kernel", "calls", "total", "mean", "% of kernel time", "tensor cores"], rows))


def _queue(v: RankViews) -> str:
    rows = [[str(s.device), str(s.stream), f"{s.num_ops:,}", f"{s.time_mean:.2f}",
             f"{s.hta_max:.0f}", f"{s.empty_pct:.1f}", f"{s.empty_idle_pct:.1f}"]
            for s in v.queue.streams]
    chart = _chart(v.queue_curves, "Launch queue over the steps", "time (ms)", "ops queued",
                   kind="step")
    return _section("queue", "Launch queue", chart + _table(
        ["device", "stream", "ops", "mean (time)", "max", "empty %", "empty and idle %"], rows))


def _critical(v: RankViews) -> str:
    cp = v.critical
    if cp is None:
        reason = escape(v.critical_error or "")
        return _section("critical-path", "Critical path", f"<p>{reason}</p>")
    head = (f"<p>{escape(cp.window)}: window {duration(cp.window_us)}, critical path "
            f"{duration(cp.length_us)}.</p>")
    bounds = [[escape(b), duration(cp.by_bound_us[b]), f"{cp.pct(b):.1f}"] for b in BOUNDS]
    ops = [[escape(o.name or "(launch to start)"), escape(o.bound_by), duration(o.time_us)]
           for o in cp.ops[:ROWS]]
    return _section("critical-path", "Critical path", head
                    + _table(["bound by", "time", "% of path"], bounds)
                    + _table(["on the path", "bound by", "time"], ops))


def _memory(v: RankViews) -> str:
    if not v.memory.devices:
        return _section("memory", "Memory", "<p>No allocator events: record with "
                        "profile_memory=True.</p>")
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
    return _section("memory", "Memory", "".join(parts))


def _python(v: RankViews) -> str:
    tree = v.python
    if not tree.nodes:
        return _section("python", "Python", "<p>No Python frames: record with "
                        "with_stack=True (aiprof run --with-stack).</p>")
    total = tree.total_cpu_us or 1.0
    rows = [[f'<span style="padding-left:{n.depth}em">{escape(n.name)}</span>', f"{n.count:,}",
             duration(n.total_cpu_us), duration(n.self_cpu_us), duration(n.total_gpu_us)]
            for n in tree.nodes if 100.0 * n.total_cpu_us / total >= 1.0][:60]
    return _section("python", "Python", _table(
        ["function (call tree)", "calls", "total CPU", "self CPU", "GPU launched"], rows))


def _samples(v: RankViews) -> str:
    if v.samples is None:
        return _section("gpu-samples", "GPU samples", "<p>No NVML samples: report on a run "
                        "record written by aiprof run.</p>")
    parts = [_chart(v.sample_curves, "NVML utilization", "time (ms)", "%")]
    for d in v.samples.devices:
        rows = [[str(n), str(int(c)), *(f"{d.step_means[m][i]:,.1f}" for m in
                                        ("gpu_util_pct", "mem_util_pct", "power_w",
                                         "sm_clock_mhz"))]
                for i, (n, c) in enumerate(zip(d.step_number.tolist(),
                                               d.step_num_samples.tolist(), strict=True))]
        parts.append(_table(["step", "samples", "SM util %", "mem util %", "power W", "SM MHz"],
                            rows))
    return _section("gpu-samples", "GPU samples", "".join(parts))
