"""What ``torch.compile`` (Inductor, default mode) removes from an eager step, per op.

The model (aiprof's), on the kernels and CPU time actually in the trace:

- **Fusion.** Inductor generates one kernel for every run of memory-bound kernels (elementwise,
  reductions, normalizations: ``kernel_kinds.ELEMENTWISE``) between two kernels it does not
  generate (cuBLAS GEMMs, cuDNN convolutions, fused attention: extern calls), on one stream:
  runs of two or more (``analysis.fusion_chains``; the rule counted runs of three before). The fused
  kernel reads the run's inputs once and writes its outputs once; its time is the longest
  member's (the one that moves the most bytes; the intermediates stay in registers). A lone
  memory-bound kernel between two extern kernels stays: default-mode Inductor does not fuse
  into cuBLAS epilogues. Only what the compiled model launches fuses: the optimizer's foreach
  kernels (launched inside ``Optimizer.step``) stay eager and keep their time. A kept member
  that ATen ran without vector loads (broadcast or strided operands) moves its bytes at the
  rate the trace's vectorized kernels reach: the generated kernel indexes any stride. The
  device copies ``aten::clone`` made for an out-of-place op written as clone-then-in-place
  go (``clone_copies``): the functionalized op is one pointwise kernel.
- **Normalizations.** Inductor decomposes ``batch_norm`` into reductions and elementwise
  kernels it generates (``torch._decomp``'s ``native_batch_norm``), so a cuDNN/ATen NCHW
  BatchNorm kernel (strided per-channel statistics, the input read again to normalize it)
  takes at most its roofline, the bytes it must move (``diagnose/nhwc.py``: 3 x the tensor
  forward in training, a reduction then a pointwise pass, 2 x in eval, 5 x backward) over the
  DRAM bandwidth; what the generated kernels still read and write.
  Inductor's layout optimization (channels_last convolutions) is not assumed: it is skipped
  in training for nets with a convolution whose input has at least twice its output channels
  (``GraphLowering.decide_layout_opt``, "pytorch_unet"), so the conversions stay.
- **Padding.** Inductor pads misaligned ``mm``/``addmm``/``bmm`` (its ``pad_mm`` pass, on by
  default): each such GEMM the model launches takes its padded shape's time
  (``misaligned_shapes``' roof); convolutions are not padded.
- **The host.** The compiled graph runs none of the eager per-op work (the modules' Python,
  the dispatcher, autograd's bookkeeping; AOTAutograd compiles the backward too): the CPU
  time of the compiled part goes, and the generated code's own cost comes instead, per
  launch and per graph call (``compiled_host``, ``compiled_launches``). What stays eager
  keeps its time: the optimizer's step (``Optimizer.*`` spans: the model is compiled, not the
  optimizer), the loop's work between the backward and the optimizer (``after_backward``),
  ``AccumulateGrad``, the DataLoader, the allocator, syncs and host work
  (``cpu_bound.host_cpu``). Each step calls the graph again: runs do not fuse across steps.
- **Calls of the model.** A step that calls its model N times (``compiled_host.calls_per_step``:
  how often it uses each weight) pays N forward and N backward graph calls, and the code
  between the calls stays eager with its backward (``between_calls``: a rollout's sampling and
  environment around its policy). A step that calls it once is taken as compiled whole.

What it leaves out: graph breaks and recompilations (one forward and one backward graph per
call of the model), where a module's ``forward`` begins and ends (with several calls, its ops
before its first weight op and after its last count as eager; with one, the step's loss counts
as compiled), and Inductor's layout optimization.
"""

from __future__ import annotations

import re

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.fusion_chains import MIN_LENGTH
from aiprof.analysis.launch import launched_at, launched_in
from aiprof.diagnose.compiled_host import (
    AUTOGRAD_FUNCTION,
    accumulate_grad_spans,
    backward_spans,
    call_spans,
    calls_per_step,
    host_costs,
)
from aiprof.diagnose.compiled_kernels import part_count, split_reduction_ops
from aiprof.diagnose.compiled_launches import compiled_launches, generated_kernel
from aiprof.diagnose.context import Context
from aiprof.diagnose.nhwc import nchw_batch_norm_durations
from aiprof.diagnose.replay import WAITING_CALL_FACTOR, Change, covered_between
from aiprof.diagnose.rules.cpu_bound import host_cpu
from aiprof.diagnose.rules.misaligned_shapes import padded_rate
from aiprof.tensor.costmodel import op_cost
from aiprof.tensor.trace_ops import call_from_row
from aiprof.trace import Trace

OPTIMIZER = re.compile(r"^Optimizer\.")
"""``torch.optim`` annotates ``Optimizer.step#AdamW.step`` and ``Optimizer.zero_grad#...``."""


def eager_spans(ctx: Context) -> iv.Intervals:
    """CPU spans that stay eager under ``torch.compile(model)``: the optimizer's step, what
    the step does after its backward, what it does between calls of its model
    (``between_calls``), and what neither compile nor a graph removes
    (``cpu_bound.host_cpu``)."""
    return iv.union_all(host_cpu(ctx), optimizer_spans(ctx), after_backward(ctx),
                        between_calls(ctx.trace))


def between_calls(trace: Trace) -> iv.Intervals:
    """Where a step calls its model more than once (``calls_per_step``): the forward outside
    the calls (``call_spans``: the code before the first, between two and after the last, up
    to the backward: a rollout's action sampling and environment, a loss) and the backward
    nodes of the ops that ran there (the same sequence number): ``torch.compile(model)``
    compiles the module, and that code and its backward run eager around its calls. Nothing
    where the step calls its model once: the whole step is taken as compiled there."""
    calls = calls_per_step(trace)
    if calls <= 1:
        return iv.EMPTY
    ops, steps = trace.cpu_ops, trace.steps
    backward = backward_spans(trace)
    ends = np.asarray([_forward_end(backward, lo, hi) for lo, hi in
                       zip(steps.start_us, steps.end_us, strict=True)])
    outside = iv.subtract(iv.union(steps.start_us, ends), call_spans(trace, calls))
    forward = iv.contains(outside, ops.ts_us) & ~iv.contains(backward, ops.ts_us)
    numbers = np.unique(ops.sequence_number[forward & (ops.sequence_number >= 0)])
    node = (trace.strings.mask(ops.name_id, AUTOGRAD_FUNCTION)
            & np.isin(ops.sequence_number, numbers) & iv.contains(backward, ops.ts_us))
    return iv.union_all(outside, iv.union(ops.ts_us[node], ops.end_us[node]))


def _forward_end(backward: iv.Intervals, lo: float, hi: float) -> float:
    """The start of the first backward span in ``[lo, hi]`` (a step's forward ends there),
    ``hi`` where none starts in it."""
    starts = backward[0][(backward[0] >= lo) & (backward[0] <= hi)]
    return float(starts.min()) if len(starts) else hi


def waiting_ops(ctx: Context, rows: np.ndarray) -> iv.Intervals:
    """The ops that launched GPU ops ``rows`` and took longer than ``WAITING_CALL_FACTOR``
    extern ops of the generated code (``compiled_host``), their allocator calls (which stay
    anyway) left out: they waited inside (cuDNN's benchmark of a first call, lazy
    initialization), which the same ATen call does under compile too; their time stays."""
    ops = ctx.trace.cpu_ops
    op = np.unique(ctx.trace.gpu_ops.op_row[rows])
    op = op[op >= 0]
    own = ops.dur_us[op] - covered_between(iv.union(*ctx.allocator.call_spans), ops.ts_us[op],
                                           ops.end_us[op])
    long = own > WAITING_CALL_FACTOR * host_costs(
        ctx.trace, ctx.timeline.launch_call_us).extern_op_us
    return iv.union(ops.ts_us[op[long]], ops.end_us[op[long]])


def after_backward(ctx: Context) -> iv.Intervals:
    """From the end of each backward to the start of the optimizer step that follows it. The
    compiled model's work ends with its backward; what the loop does then, before stepping
    the optimizer (gradient clipping, logging), is eager."""
    lo, hi = backward_spans(ctx.trace)
    opt_lo, _ = optimizer_spans(ctx)
    if not len(lo) or not len(opt_lo):
        return iv.EMPTY
    last = np.searchsorted(lo, opt_lo, side="left") - 1
    ends = np.where(last >= 0, hi[np.maximum(last, 0)], np.inf)
    keep = ends < opt_lo
    return iv.union(ends[keep], opt_lo[keep])


def compiled_runs(ctx: Context) -> list[np.ndarray]:
    """The runs Inductor fuses: each chain's kernels launched from the compiled model, split
    where an eager part (the optimizer's foreach kernels) launched one and where a step ends
    (each step calls the compiled graph again); runs of at least ``fusion_chains.MIN_LENGTH``
    kernels."""
    eager = eager_spans(ctx)
    step_starts = ctx.trace.steps.start_us
    runs: list[np.ndarray] = []
    for chain in ctx.chains.chains:
        inside = launched_in(ctx.trace, chain.rows, eager)
        step = np.searchsorted(step_starts, np.nan_to_num(launched_at(ctx.trace, chain.rows)))
        new_step = np.concatenate([[False], step[1:] != step[:-1]])
        for part in np.split(np.arange(len(chain.rows)), np.flatnonzero(new_step)):
            edges = np.diff(np.concatenate([[0], (~inside[part]).astype(np.int8), [0]]))
            for lo, hi in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1),
                              strict=True):
                if hi - lo >= MIN_LENGTH:
                    runs.append(chain.rows[part[lo:hi]])
    return runs


GENERIC_ELEMENTWISE = re.compile(r"^void at::native::(unrolled_)?elementwise_kernel<")
"""ATen's pointwise kernels without vector loads: ``gpu_kernel_impl`` takes
``vectorized_elementwise_kernel`` only when every operand is contiguous and aligned, else
``unrolled_elementwise_kernel`` (contiguous, unaligned) or ``elementwise_kernel`` with an
offset calculator per element (broadcast or strided operands: a bias over NHWC channels)
(aten/src/ATen/native/cuda/CUDALoops.cuh)."""
VECTORIZED_ELEMENTWISE = re.compile(r"^void at::native::vectorized_elementwise_kernel<")
RATE_SAMPLE = 256
"""Vectorized kernels whose rate is read, the longest first (the ones on the largest tensors;
the cost model per op is Python, so a trace of millions of kernels reads this many)."""


def op_bytes(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Per GPU op of ``rows``: the bytes its launching op moves (the op cost model; 0 where
    unknown: no shapes, no op, no model)."""
    ops = ctx.trace.gpu_ops.op_row[rows]
    out = np.zeros(len(rows))
    for i, op in enumerate(ops):
        if op >= 0:
            cost = op_cost(call_from_row(ctx.trace, int(op)))
            out[i] = cost.bytes_total if cost.has_model else 0.0
    return out


def vectorized_rate(ctx: Context) -> float | None:
    """Bytes per µs the trace's vectorized ATen pointwise kernels reach on tensors larger
    than the L2 cache (their bytes come from DRAM), the highest, at most the DRAM bandwidth;
    None without such a kernel or the L2 size."""
    product, bandwidth = ctx.spec.product, ctx.memory_bytes_per_s()
    if product is None or not product.l2_bytes or not bandwidth:
        return None
    gpu = ctx.trace.gpu_ops
    rows = np.flatnonzero(ctx.trace.strings.mask(gpu.name_id, VECTORIZED_ELEMENTWISE))
    rows = rows[np.argsort(-gpu.dur_us[rows], kind="stable")[:RATE_SAMPLE]]
    nbytes = op_bytes(ctx, rows)
    large = nbytes > product.l2_bytes
    if not large.any():
        return None
    rate = float(np.max(nbytes[large] / np.maximum(gpu.dur_us[rows[large]], 1e-9)))
    return min(rate, bandwidth / 1e6)


def fused_durations(ctx: Context, runs: list[np.ndarray] | None = None
                    ) -> tuple[dict[int, float], np.ndarray]:
    """New durations of the fused runs (the longest member kept, the others 0) and the rows
    of the kernels fused away. A kept member ATen ran without vector loads takes its bytes at
    the vectorized rate (``vectorized_rate``): the generated kernel indexes broadcast and
    strided operands and still loads vectors."""
    new: dict[int, float] = {}
    gone: list[int] = []
    kept: list[int] = []
    for run in compiled_runs(ctx) if runs is None else runs:
        keep = kept_row(ctx, run)
        kept.append(keep)
        gone += [int(r) for r in run if int(r) != keep]
    new.update(generated_durations(ctx, np.asarray(kept, dtype=np.int64)))
    new.update({r: 0.0 for r in gone})
    return new, np.asarray(gone, dtype=np.int64)


def kept_row(ctx: Context, run: np.ndarray) -> int:
    """The member of a fused run whose kernel stays (the longest)."""
    return int(run[int(np.argmax(ctx.trace.gpu_ops.dur_us[run]))])


def generated_durations(ctx: Context, kept: np.ndarray) -> dict[int, float]:
    """The kept members ATen ran without vector loads, at their bytes over the vectorized
    rate (never longer than they took)."""
    names = ctx.trace.gpu_ops.name_id[kept]
    generic = kept[ctx.trace.strings.mask(names, GENERIC_ELEMENTWISE)]
    rate = vectorized_rate(ctx) if len(generic) else None
    if rate is None:
        return {}
    nbytes, dur = op_bytes(ctx, generic), ctx.trace.gpu_ops.dur_us[generic]
    return {int(r): float(min(d, b / rate)) for r, d, b in zip(generic, dur, nbytes, strict=True)
            if b > 0}


def optimizer_spans(ctx: Context) -> iv.Intervals:
    """CPU spans of ``Optimizer.step``/``zero_grad`` annotations (eager under a compiled
    model)."""
    ann = ctx.trace.annotations
    pick = ctx.trace.strings.mask(ann.name_id, OPTIMIZER)
    return iv.union(ann.ts_us[pick], ann.ts_us[pick] + ann.dur_us[pick])


def compile_change(ctx: Context, extra_gpu_dur_us: dict[int, float]) -> Change | None:
    """The step under ``torch.compile``: runs fused, NCHW BatchNorm at its roofline, misaligned
    GEMMs padded, ``extra_gpu_dur_us`` (fused attention) applied; on the host, the CPU time of
    the compiled part (what runs outside the eager spans) replaced by the generated code's
    (``compiled_launches``)."""
    runs = compiled_runs(ctx)
    fused, _ = fused_durations(ctx, runs)
    if not fused and not extra_gpu_dur_us:
        return None
    bandwidth = ctx.memory_bytes_per_s()
    norms = nchw_batch_norm_durations(ctx.trace, bandwidth) if bandwidth else {}
    rows = ctx.timeline.gpu_row[ctx.timeline.gpu_row >= 0]
    stays = stays_eager_spans(ctx, rows)
    rows = rows[~launched_in(ctx.trace, rows, stays)]
    gpu_dur = {**norms, **padded_gemm_durations(ctx), **fused, **extra_gpu_dur_us,
               **dict.fromkeys(clone_copies(ctx.trace, rows).tolist(), 0.0)}
    return Change(gpu_dur_us=gpu_dur, removed_cpu=iv.subtract(step_window(ctx.trace), stays),
                  added_cpu_us=compiled_launches(ctx.trace, rows, gpu_dur,
                                                 ctx.timeline.launch_call_us,
                                                 {kept_row(ctx, r): r for r in runs}))


DEVICE_COPY = re.compile(r"^Memcpy DtoD")
CLONE_OP = re.compile(r"^aten::clone$")


def clone_copies(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The device-to-device copies of ``rows`` that ``aten::clone`` made (its ``copy_`` into a
    new tensor): ATen's out-of-place ops written as a clone then the in-place op
    (``masked_fill``, an in-place activation autograd must keep the input of) copy the tensor
    first; Inductor's functionalization makes them one pointwise kernel that reads the input
    and writes the output once, which the in-place op's kernel already moves, so the copy
    goes (the compiled steps of ``tests/data/diagnose/compiled*``: hand_attention 11 copies a
    step, 1.29 ms, against 1, 0.02 ms; resnet50_pageable 56 against none; deeplabv3 20 against
    none)."""
    gpu, ops = trace.gpu_ops, trace.cpu_ops
    rows = rows[trace.strings.mask(gpu.name_id[rows], DEVICE_COPY) & (gpu.op_row[rows] >= 0)]
    parents = [parent_op(trace, op) for op in gpu.op_row[rows].tolist()]
    keep = [p >= 0 and CLONE_OP.match(trace.name(int(ops.name_id[p]))) is not None
            for p in parents]
    return np.asarray(rows[np.asarray(keep, dtype=bool)])


def parent_op(trace: Trace, op: int) -> int:
    """The op that CPU op ``op`` ran inside (the latest-starting one on its thread holding it),
    -1 where none does."""
    ops = trace.cpu_ops
    holds = np.flatnonzero((ops.tid == ops.tid[op]) & (ops.ts_us <= ops.ts_us[op])
                           & (ops.end_us >= ops.end_us[op]))
    holds = holds[holds != op]
    return int(holds[np.argmax(ops.ts_us[holds])]) if len(holds) else -1


def stays_eager_spans(ctx: Context, rows: np.ndarray) -> iv.Intervals:
    """CPU spans whose work stays eager under compile (``eager_spans``, ``AccumulateGrad``, the
    ops of ``rows`` that waited inside: ``waiting_ops``)."""
    return iv.union_all(eager_spans(ctx), accumulate_grad_spans(ctx.trace),
                        waiting_ops(ctx, rows))


def stays_eager(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Per GPU op of ``rows``: launched where the step stays eager (``stays_eager_spans``)."""
    return launched_in(ctx.trace, rows, stays_eager_spans(ctx, rows))


def kept_parts_per_step(ctx: Context, split_levels: bool = False) -> float:
    """Parts (``compiled_kernels.part_count``) of the memory-bound kernels the compile model
    keeps in the compiled part, per step, as ``compile_change`` counts them (kernels of ops
    without recorded shapes count none); with ``split_levels``, also the levels of partial sums
    of the reductions Inductor splits (``compiled_kernels.split_reduction_ops``; measured, not
    in the model: ``docs/diagnose.md``'s ninth pass)."""
    trace = ctx.trace
    runs = compiled_runs(ctx)
    fused, _ = fused_durations(ctx, runs)
    rows = ctx.timeline.gpu_row[ctx.timeline.gpu_row >= 0]
    rows = np.unique(rows[~stays_eager(ctx, rows)])
    rows = rows[np.array([fused.get(int(r), 1.0) > 0 for r in rows], dtype=bool)]
    rows = rows[generated_kernel(trace, rows)]
    by_kept = {kept_row(ctx, r): r for r in runs}
    split = split_reduction_ops(trace) if split_levels and len(backward_spans(trace)[0]) else None
    parts = [part_count(trace, by_kept.get(int(r), np.array([r], dtype=np.int64)), split)
             for r in rows.tolist()]
    return sum(p or 0 for p in parts) / max(len(trace.steps), 1)


PADDED_GEMM = re.compile(r"^aten::(mm|addmm|bmm)$")
"""The GEMMs Inductor pads (``torch/_inductor/fx_passes/pad_mm.py``, on by default with
``config.shape_padding``): ``mm``, ``addmm`` and ``bmm`` with a dimension off the alignment
(8 elements in half precision, 4 in FP32), where the padded op benchmarks faster;
convolutions are not padded."""


def padded_gemm_durations(ctx: Context) -> dict[int, float]:
    """The misaligned GEMMs the compiled model launches (``PADDED_GEMM``) at the time of their
    padded shape: ``misaligned_shapes``' roof (the rate the trace's aligned GEMMs of the
    precision reach, the bytes at the DRAM bandwidth), never longer than they took."""
    bandwidth = ctx.memory_bytes_per_s()
    ops = [o for o in ctx.shapes.ops if PADDED_GEMM.match(o.name) and o.kernel_us > 0]
    if not bandwidth or not ops:
        return {}
    dur = ctx.trace.gpu_ops.dur_us
    new: dict[int, float] = {}
    for op in ops:
        rate = padded_rate(ctx, op.precision)
        if not rate:
            continue
        roof_us = max(op.padded_flops / rate, op.bytes_total / bandwidth) * 1e6
        scale = min(1.0, roof_us / op.kernel_us)
        new.update({int(r): float(dur[r]) * scale for r in op.kernel_rows})
    return new
