"""The compile model against the compiled steps: each eager step of the counterfactual suite
that has a compiled step recorded (``tests/data/diagnose/compiled``, ``compiled_second``,
``compiled_third``, ``compiled_fourth``, ``compiled_fifth``, ``compiled_sixth``; a workload
recorded twice has a row per recording).

    python benchmarks/compiled_vs_eager.py

Prints Markdown, per workload: the GPU time per step of the eager step's kernels, of the compile
model's kernels (``unfused_elementwise.change``) and of the compiled step's kernels (those its
steps launched: a kernel of the step before the profiled one, still running when it began, is
not the step's), each split into cuDNN/cuBLAS kernels (``kernel_kinds.GEMM_OR_CONV``), cuDNN's
NCHW<->NHWC conversions (``tensor.layout.CONVERSION_KERNEL``) and the rest; the compiled step's
Triton kernels per kernel the model keeps and per part of them (``compiled_kernels.part_count``:
the kernels Inductor cannot merge), and per part with the levels of partial sums of the
reductions Inductor splits counted (``compiled_reductions``; measured, not in the model); the
host time of the compiled graphs' calls per step in launch calls, the generated code's cost the
model adds (``added_cpu_us``, in the eager trace's launch calls) against the compiled step's
forward and backward regions (the profiler's per-event cost estimated and taken out, in its
own launch calls); the profiler's per-event cost in the compiled trace as estimated from its
nesting and as its step timed without the profiler implies (were it host-bound); and the step
under compile over the eager step, as the model replays it and as the compiled-step session
timed it (medians of its rounds: where both steps are host-bound the host's speed cancels in
that ratio). Then, per compiled step with Inductor's BatchNorm kernels (``triton_*`` named
after ``batch_norm``), their time per step and the rate they reach (the bytes of their
recorded arguments, inputs and outputs, over their time; medians over the kernels whose
largest argument exceeds 1 MB and 16 MB).
"""

from __future__ import annotations

import json
import re
import statistics
from math import prod
from pathlib import Path

import numpy as np

from aiprof.analysis.gpu_window import gpu_window, launch_ts_us
from aiprof.analysis.intervals import contains
from aiprof.analysis.kernel_kinds import ELEMENTWISE, GEMM_OR_CONV
from aiprof.diagnose.compiled_host import (
    BACKWARD_REGION,
    FORWARD_REGION,
    TRITON_KERNEL,
    launch_call_us,
)
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.profiler_cost import estimated_overhead_us
from aiprof.diagnose.replay import replay
from aiprof.diagnose.rules import unfused_elementwise
from aiprof.evaluation import load_suite
from aiprof.tensor.layout import CONVERSION_KERNEL
from aiprof.trace import Trace, load_trace

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "diagnose"
FOLDERS = ("compiled", "compiled_second", "compiled_third", "compiled_fourth", "compiled_fifth",
           "compiled_sixth")


def split_ms(trace: Trace, rows: np.ndarray, dur_us: np.ndarray) -> tuple[float, float, float]:
    """(cuDNN/cuBLAS, layout conversions, the rest) of ``dur_us`` over ``rows``, ms per step."""
    ids = trace.gpu_ops.name_id[rows]
    conversion = trace.strings.mask(ids, CONVERSION_KERNEL)
    lib = trace.strings.mask(ids, GEMM_OR_CONV) & ~conversion
    rest = ~lib & ~conversion
    steps = max(len(trace.steps), 1) * 1e3
    return (float(dur_us[lib].sum()) / steps, float(dur_us[conversion].sum()) / steps,
            float(dur_us[rest].sum()) / steps)


def kept_kernels(ctx: Context) -> float:
    """Memory-bound kernels of the compiled part per step, each fused run counted once."""
    from aiprof.diagnose.compiled import compiled_runs, eager_spans, launched_in  # after rules

    trace = ctx.trace
    rows = ctx.timeline.gpu_row[ctx.timeline.gpu_row >= 0]
    rows = rows[~launched_in(ctx, rows, eager_spans(ctx))]
    ids = trace.gpu_ops.name_id[rows]
    mem = int(np.count_nonzero(trace.strings.mask(ids, ELEMENTWISE)
                               & ~trace.strings.mask(ids, GEMM_OR_CONV)))
    runs = compiled_runs(ctx)
    return (mem - sum(len(r) for r in runs) + len(runs)) / max(len(trace.steps), 1)


def row(name: str, eager_path: Path, compiled_path: Path, entry: dict[str, object]) -> str:
    from aiprof.diagnose.compiled import kept_parts_per_step  # after rules

    trace = load_trace(eager_path)
    ctx = Context(trace, DiagnoseOptions())
    change = unfused_elementwise.change(ctx)
    rows = ctx.timeline.gpu_row[ctx.timeline.gpu_row >= 0]
    eager_us = trace.gpu_ops.dur_us[rows]
    model_us = np.array([change.gpu_dur_us.get(int(r), float(d)) if change else float(d)
                         for r, d in zip(rows, eager_us, strict=True)])
    compiled = load_trace(compiled_path)
    crow = launched_rows(compiled)
    kernels = compiled.kernels
    triton = compiled.strings.mask(kernels.name_id, TRITON_KERNEL) & (kernels.launch_row >= 0)
    per_step = float(np.count_nonzero(triton)) / max(len(compiled.steps), 1)
    per_kept = per_step / max(kept_kernels(ctx), 1.0)
    per_part = per_step / max(kept_parts_per_step(ctx), 1.0)
    per_split_part = per_step / max(kept_parts_per_step(ctx, split_levels=True), 1.0)
    modelled = replay(ctx.timeline, change) / ctx.base_us if change and ctx.base_us else 1.0
    base = entry.get("base_rounds_ms")
    fixed = entry.get("compile_rounds_ms")
    timed = (statistics.median(fixed) / statistics.median(base)
             if isinstance(base, list) and isinstance(fixed, list) else float("nan"))
    cells = [split_ms(trace, rows, eager_us), split_ms(trace, rows, model_us),
             split_ms(compiled, crow, compiled.gpu_ops.dur_us[crow])]
    gpu = " | ".join(f"{a + b + c:.2f} ({a:.2f} + {b:.2f} + {c:.2f})" for a, b, c in cells)
    unit = launch_call_us(trace) or ctx.timeline.launch_call_us
    model_calls = (sum(change.added_cpu_us.values()) if change else 0.0) / unit / max(
        len(trace.steps), 1)
    traced_calls = graph_call_calls(compiled)
    fixed = entry.get("compile_rounds_ms")
    implied = (implied_overhead_us(compiled, 1e3 * statistics.median(fixed))
               if isinstance(fixed, list) else float("nan"))
    return (f"| {name} | {gpu} | {per_kept:.2f} | {per_part:.2f} | {per_split_part:.2f} "
            f"| {model_calls:.0f} "
            f"| {traced_calls:.0f} | {estimated_overhead_us(compiled) or 0.0:.2f} "
            f"| {implied:.2f} | {modelled:.2f} | {timed:.2f} |")


def launched_rows(trace: Trace) -> np.ndarray:
    """The GPU ops the profiled steps launched (their launch call inside a step), wherever
    they ran."""
    rows = np.arange(len(trace.gpu_ops))
    at = launch_ts_us(trace, rows)
    return np.asarray(rows[~np.isnan(at)
                           & contains(gpu_window(trace).window, np.nan_to_num(at))])


def implied_overhead_us(trace: Trace, timed_step_us: float) -> float:
    """The profiler's cost per recorded CPU event that would make the compiled step's profiled
    span last its step timed without the profiler (``compile_rounds_ms``), were the step
    host-bound: (span - timed) / events in the span."""
    ops, rt = trace.cpu_ops, trace.runtime
    lo, hi = float(trace.steps.start_us.min()), float(trace.steps.end_us.max())
    events = np.concatenate([ops.ts_us, rt.ts_us])
    inside = int(np.count_nonzero((events >= lo) & (events <= hi)))
    return (hi - lo - timed_step_us * len(trace.steps)) / max(inside, 1)


def graph_call_calls(trace: Trace) -> float:
    """Host time of a compiled step's graph calls (Dynamo's forward regions, the backward
    nodes), the profiler's cost per recorded event in them taken out
    (``profiler_cost.estimated_overhead_us``), in the trace's launch calls, per step."""
    ops, rt, ann = trace.cpu_ops, trace.runtime, trace.annotations
    overhead = estimated_overhead_us(trace) or 0.0
    events = np.sort(np.concatenate([ops.ts_us, rt.ts_us, ann.ts_us]))
    rows = np.flatnonzero(trace.strings.mask(ops.name_id, FORWARD_REGION)
                          | trace.strings.mask(ops.name_id, BACKWARD_REGION))
    lo, hi = ops.ts_us[rows], ops.ts_us[rows] + ops.dur_us[rows]
    cost = float(np.sum(hi - lo) - overhead * np.sum(np.searchsorted(events, hi)
                                                     - np.searchsorted(events, lo)))
    unit = launch_call_us(trace)  # None where no cudaLaunchKernel was recorded
    return cost / unit / max(len(trace.steps), 1) if unit else float("nan")


BATCH_NORM_TRITON = re.compile(r"^triton_(red|per|poi)_.*batch_norm")
ELEMENT_BYTES = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8, "long int": 8,
                 "int": 4, "bool": 1}
"""Bytes per element of the argument types the profiler records (4 where not listed)."""


def batch_norm_rates(trace: Trace) -> str | None:
    """BatchNorm Triton ms per step; median TB/s of reductions and pointwise kernels over 1 and
    16 MB (None without such kernels)."""
    gpu, ops = trace.gpu_ops, trace.cpu_ops
    rows = np.flatnonzero(trace.strings.mask(gpu.name_id, BATCH_NORM_TRITON) & (gpu.op_row >= 0))
    if not len(rows):
        return None
    rates: dict[tuple[str, float], list[float]] = {}
    for r in rows.tolist():
        op = int(gpu.op_row[r])
        dims = trace.json_value(int(ops.input_dims_id[op])) if ops.input_dims_id[op] >= 0 else []
        types = trace.json_value(int(ops.input_types_id[op])) if ops.input_types_id[op] >= 0 else []
        sizes = [prod(d) * ELEMENT_BYTES.get(str(t), 4)
                 for d, t in zip(dims or [], types or [], strict=False)
                 if isinstance(d, list) and d and all(isinstance(v, int) for v in d)]
        kind = "pointwise" if trace.name(int(gpu.name_id[r])).startswith("triton_poi") \
            else "reduction"
        for floor in (1e6, 16e6):
            if sizes and max(sizes) > floor and gpu.dur_us[r] > 0:
                rates.setdefault((kind, floor), []).append(sum(sizes) / gpu.dur_us[r] / 1e6)
    ms = float(gpu.dur_us[rows].sum()) / max(len(trace.steps), 1) / 1e3
    cells = [f"{statistics.median(rates[(k, f)]):.2f} ({len(rates[(k, f)])})"
             if (k, f) in rates else "-"
             for k in ("reduction", "pointwise") for f in (1e6, 16e6)]
    return f"{ms:.2f} | " + " | ".join(cells)


def main() -> None:
    suite = {w.name: w for w in load_suite(DATA / "counterfactual")}
    print("| workload | eager GPU ms/step (library + conversions + rest) | compile model | "
          "compiled step | "
          "Triton kernels per kept kernel | per part | per part, split reductions counted | "
          "graph calls' host, launch calls/step, "
          "model | compiled step | profiler µs/event, estimated | implied by the timed step | "
          "compiled/eager step, model | timed |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
          "| ---: |")
    for folder in FOLDERS:
        doc = json.loads((DATA / folder / "compiled_steps.json").read_text())
        for entry in doc["workloads"]:
            name = entry["workload"]
            if "trace" not in entry or name not in suite:
                continue
            path = suite[name].trace
            eager_path = path if path.is_file() else next(path.glob("*.trace.json.gz"))
            print(row(name, eager_path, DATA / folder / entry["trace"], entry))
    print()
    print("| compiled step | BatchNorm Triton ms/step | reductions TB/s > 1 MB (kernels) | "
          "> 16 MB | pointwise > 1 MB | > 16 MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for folder in FOLDERS:
        for path in sorted((DATA / folder).glob("*.compiled.trace.json.gz")):
            rates = batch_norm_rates(load_trace(path))
            if rates:
                print(f"| {path.name.split('.')[0]} | {rates} |")


if __name__ == "__main__":
    main()
