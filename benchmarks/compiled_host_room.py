"""How far the compile model's host side is from each compile truth, as one factor.

    python benchmarks/compiled_host_room.py [FOLDER]

For every workload of the counterfactual suite (``tests/data/diagnose/counterfactual`` by
default) with a measured ``unfused_elementwise`` fix (torch.compile or SDPA, pooled as the
score pools them), the compile model's change (``unfused_elementwise.change``) is replayed with
the generated code's host cost (``Change.added_cpu_us``: per Triton launch, per extern op, per
graph call; ``compiled_launches``) multiplied by a factor, the GPU side and the removed eager
dispatch unchanged. Printed per workload, as Markdown: the measured and the estimated gain; the
factor at which the estimate would equal the truth and the range of factors within the score's
±30% (for a truth of 5% or less: the factor below which the estimate would exceed 10%, a false
positive); and the generated code's host as the model adds it over the eager dispatch the replay
removes (the CPU work between the events, the profiler's cost taken out), at factor 1 and over
that range. A change to the host costs that moves every workload by one factor (a constant, a
unit) can only be right where the ranges overlap; the rows whose range excludes 1 are what a
host-side mechanism has to move, and by how much. Where a compiled step of the workload was
recorded (``tests/data/diagnose/compiled*``), the last column is the factor a model that
counted exactly what that step's graph calls cost, in its own launch calls, would apply (their
regions' time, the profiler's estimated cost per event taken out, over the model's), and the
estimate at that factor: whether counting right is enough.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from aiprof.diagnose.compiled_host import BACKWARD_REGION, FORWARD_REGION, launch_call_us
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.profiler_cost import estimated_overhead_us
from aiprof.diagnose.replay import Change, cpu_work, replay
from aiprof.diagnose.rules import unfused_elementwise
from aiprof.evaluation import load_suite
from aiprof.evaluation.score import FALSE_POSITIVE_CLAIM_PCT, GAIN_TOLERANCE, measured_by_category
from aiprof.trace import Trace, load_trace

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "data" / "diagnose" / "counterfactual"
CATEGORY = "unfused_elementwise"
MAX_FACTOR = 8.0
"""The search's upper end (a factor beyond it prints as ``>8``)."""
COMPILED = ("compiled", "compiled_second", "compiled_third", "compiled_fourth",
            "compiled_fifth", "compiled_sixth")


def compiled_steps(data: Path) -> dict[str, list[Path]]:
    """Per workload, the traces of its compiled steps (``compiled_steps.json`` of each folder)."""
    out: dict[str, list[Path]] = {}
    for folder in COMPILED:
        listing = data / folder / "compiled_steps.json"
        if listing.is_file():
            for entry in json.loads(listing.read_text())["workloads"]:
                if "trace" in entry:
                    out.setdefault(entry["workload"], []).append(data / folder / entry["trace"])
    return out


def graph_calls_launch_calls(trace: Trace) -> float | None:
    """A compiled step's graph calls (forward regions, backward nodes) per step, the profiler's
    estimated cost per recorded event taken out, in the trace's launch calls."""
    ops, rt, ann = trace.cpu_ops, trace.runtime, trace.annotations
    unit = launch_call_us(trace)
    rows = np.flatnonzero(trace.strings.mask(ops.name_id, FORWARD_REGION)
                          | trace.strings.mask(ops.name_id, BACKWARD_REGION))
    if not unit or not len(rows):
        return None
    lo, hi = ops.ts_us[rows], ops.ts_us[rows] + ops.dur_us[rows]
    events = np.sort(np.concatenate([ops.ts_us, rt.ts_us, ann.ts_us]))
    inside = np.searchsorted(events, hi) - np.searchsorted(events, lo)
    cost_us = float(np.sum(hi - lo) - (estimated_overhead_us(trace) or 0.0) * inside.sum())
    return cost_us / unit / max(len(trace.steps), 1)


def factor_at(gain: Callable[[float], float], target_pct: float) -> float | None:
    """The factor at which ``gain`` (decreasing in it) equals ``target_pct``: 0 where even no
    host cost gives less, None where ``MAX_FACTOR`` still gives more."""
    low, high = 0.0, MAX_FACTOR
    if gain(low) < target_pct:
        return 0.0
    if gain(high) > target_pct:
        return None
    while high - low > 1e-3:
        middle = (low + high) / 2
        low, high = (middle, high) if gain(middle) > target_pct else (low, middle)
    return (low + high) / 2


def removed_dispatch_us(ctx: Context, change: Change) -> float:
    """The CPU work between the replay's events that ``change`` removes (profiler cost out)."""
    before, tail = cpu_work(ctx.timeline, Change())
    after, after_tail = cpu_work(ctx.timeline, replace(change, added_cpu_us={}))
    return float(before.sum() + tail - after.sum() - after_tail)


def text(value: float | None) -> str:
    return f">{MAX_FACTOR:.0f}" if value is None else f"{value:.2f}"


def row(name: str, trace_path: Path, measured_pct: float, compiled: list[Path]) -> str:
    ctx = Context(load_trace(trace_path), DiagnoseOptions())
    change = unfused_elementwise.change(ctx)
    if change is None or not ctx.base_us:
        return f"| {name} | {measured_pct:.1f} | no change | | | | | |"
    base_us = ctx.base_us

    def gain(factor: float) -> float:
        scaled = {r: us * factor for r, us in change.added_cpu_us.items()}
        return 100.0 * (1.0 - replay(ctx.timeline, replace(change, added_cpu_us=scaled))
                        / base_us)

    ratio = sum(change.added_cpu_us.values()) / max(removed_dispatch_us(ctx, change), 1e-9)
    if measured_pct > 5.0:
        at = factor_at(gain, measured_pct)
        low = factor_at(gain, (1 + GAIN_TOLERANCE) * measured_pct)
        high = factor_at(gain, (1 - GAIN_TOLERANCE) * measured_pct)
        band = f"{text(low)} to {text(high)}"
        ratios = " to ".join(f"{f * ratio:.2f}" if f is not None else text(None)
                             for f in (low, high))
    else:
        at = None
        floor = factor_at(gain, FALSE_POSITIVE_CLAIM_PCT)
        band = f"at least {text(floor)} (a false positive below)"
        ratios = f"at least {text(None if floor is None else floor * ratio)}"
    truth = "-" if measured_pct <= 5.0 else text(at)
    unit = launch_call_us(ctx.trace) or ctx.timeline.launch_call_us
    modelled = sum(change.added_cpu_us.values()) / unit / max(len(ctx.trace.steps), 1)
    counted = []
    for path in compiled:
        traced = graph_calls_launch_calls(load_trace(path))
        if traced is not None and modelled > 0:
            counted.append(f"{traced / modelled:.2f}: {gain(traced / modelled):.1f}")
    return (f"| {name} | {measured_pct:.1f} | {gain(1.0):.1f} | {truth} | {band} | {ratio:.2f} "
            f"| {ratios} | {'; '.join(counted) or '-'} |")


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else DEFAULT
    steps = compiled_steps(DEFAULT.parent)
    print("| workload | measured % | estimated % | factor at the truth | factors within ±30% "
          "| generated host / eager dispatch removed | the same within ±30% "
          "| factor counted as the compiled step: estimate % |")
    print("| --- | ---: | ---: | ---: | --- | ---: | --- | --- |")
    for workload in load_suite(folder):
        measured = measured_by_category(workload.fixes)
        if CATEGORY not in measured:
            continue
        path = workload.trace if workload.trace.is_file() else next(
            workload.trace.glob("*.trace.json.gz"))
        print(row(workload.name, path, measured[CATEGORY], steps.get(workload.name, [])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
