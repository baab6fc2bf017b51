"""What ``torch.compile`` (Inductor, default mode) removes from an eager step, per op.

The model (aiprof's), on the kernels and CPU time actually in the trace:

- **Fusion.** Inductor generates one kernel for every run of memory-bound kernels (elementwise,
  reductions, normalizations: ``kernel_kinds.ELEMENTWISE``) between two kernels it does not
  generate (cuBLAS GEMMs, cuDNN convolutions, fused attention: extern calls), on one stream:
  runs of two or more (``analysis.fusion_chains``; the rule counted runs of three before). The fused
  kernel reads the run's inputs once and writes its outputs once; its time is the longest
  member's (the one that moves the most bytes; the intermediates stay in registers). A lone
  memory-bound kernel between two extern kernels stays: default-mode Inductor does not fuse
  into cuBLAS epilogues.
- **Normalizations.** Inductor decomposes ``batch_norm`` into reductions and elementwise
  kernels it generates (``torch._decomp``'s ``native_batch_norm``), so a cuDNN/ATen NCHW
  BatchNorm kernel (strided per-channel statistics, the input read again to normalize it)
  takes at most its roofline, the bytes it must move (``diagnose/nhwc.py``: 2 x the tensor
  forward, 3 x backward) over the DRAM bandwidth; what the fused kernel still reads and writes.
  Inductor's layout optimization (channels_last convolutions) is not assumed: it is skipped
  in training for nets with a convolution whose input has at least twice its output channels
  (``GraphLowering.decide_layout_opt``, "pytorch_unet"), so the conversions stay.
- **Launches.** Each fused-away kernel's launch call goes; each kept kernel keeps its call
  (the generated wrapper still launches it).
- **Dispatch.** The compiled graph runs without the eager per-op work: the Python of the
  modules, the dispatcher, autograd's bookkeeping between ops (AOTAutograd compiles the
  backward too). The CPU work between launches goes, outside what stays eager: the
  optimizer's step (``Optimizer.*`` spans: the model is compiled, not the optimizer), the
  DataLoader, the allocator, syncs and host work (``cpu_bound.host_cpu``).

What it leaves out: shape padding of misaligned GEMMs (Inductor's ``shape_padding``; that is
``misaligned_shapes``' change), the generated wrapper's own Python per kernel (a launch call
is its lower bound, so the gain is an upper bound), guards, and graph breaks.
"""

from __future__ import annotations

import re

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.diagnose.context import Context
from aiprof.diagnose.nhwc import nchw_batch_norm_durations
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rules.cpu_bound import host_cpu

OPTIMIZER = re.compile(r"^Optimizer\.")
"""``torch.optim`` annotates ``Optimizer.step#AdamW.step`` and ``Optimizer.zero_grad#...``."""


def fused_durations(ctx: Context) -> tuple[dict[int, float], np.ndarray]:
    """New durations of the fused runs (the longest member kept, the others 0) and the rows
    of the kernels fused away."""
    dur = ctx.trace.gpu_ops.dur_us
    gone: list[int] = []
    for run in ctx.chains.chains:
        keep = int(run.rows[int(np.argmax(dur[run.rows]))])
        gone += [int(r) for r in run.rows if int(r) != keep]
    return {r: 0.0 for r in gone}, np.asarray(gone, dtype=np.int64)


def optimizer_spans(ctx: Context) -> iv.Intervals:
    """CPU spans of ``Optimizer.step``/``zero_grad`` annotations (eager under a compiled
    model)."""
    ann = ctx.trace.annotations
    pick = ctx.trace.strings.mask(ann.name_id, OPTIMIZER)
    return iv.union(ann.ts_us[pick], ann.ts_us[pick] + ann.dur_us[pick])


def launch_spans(ctx: Context, rows: np.ndarray) -> iv.Intervals:
    """The eager CPU work of GPU ops ``rows``: the op that launched each (its dispatch and
    launch call), else the launch call alone."""
    gpu, ops, rt = ctx.trace.gpu_ops, ctx.trace.cpu_ops, ctx.trace.runtime
    launch = gpu.launch_row[rows]
    calls = iv.union(rt.ts_us[launch[launch >= 0]], rt.end_us[launch[launch >= 0]])
    op = gpu.op_row[rows]
    op = op[op >= 0]
    return iv.union_all(calls, iv.union(ops.ts_us[op], ops.end_us[op]))


def compile_change(ctx: Context, extra_gpu_dur_us: dict[int, float]) -> Change | None:
    """The step under ``torch.compile``: runs fused, their launches gone, eager dispatch gone
    outside the eager parts; ``extra_gpu_dur_us`` (fused attention) applied too."""
    fused, gone = fused_durations(ctx)
    if not fused and not extra_gpu_dur_us:
        return None
    bandwidth = ctx.memory_bytes_per_s()
    norms = nchw_batch_norm_durations(ctx.trace, bandwidth) if bandwidth else {}
    eager = iv.union_all(host_cpu(ctx), optimizer_spans(ctx))
    removed = iv.union_all(launch_spans(ctx, gone), python_between_ops(ctx))
    return Change(gpu_dur_us={**norms, **fused, **extra_gpu_dur_us},
                  removed_cpu=iv.subtract(removed, eager))


def python_between_ops(ctx: Context) -> iv.Intervals:
    """Host time inside the steps with no CPU op or runtime call on any thread: the Python of
    the modules between their ops (the compiled graph runs none of it)."""
    ops, rt = ctx.trace.cpu_ops, ctx.trace.runtime
    if len(ops.ts_us) == 0:
        return iv.EMPTY
    events = iv.union(np.concatenate([ops.ts_us, rt.ts_us]),
                      np.concatenate([ops.end_us, rt.end_us]))
    return iv.subtract(step_window(ctx.trace), events)

