"""The host's side of a compiled step: what the generated code costs before each kernel.

Applies ``compiled_host``'s costs (in units of the trace's own launch call) to the kernels the
compiled part of an eager step still launches: per memory-bound kernel Inductor generates a
Triton launch; in a step with a backward, per kept kernel the Triton kernels of its run's parts
(``compiled_kernels``: one per element count and per reduction; ``TRAINING_LAUNCHES_PER_KERNEL``
where the trace has no shapes), in one without, one; per extern
op (a GEMM, an ATen fallback; a convolution costs its own, a backward one about three forward
ones) one call of it from the wrapper, whatever number of kernels it launches; per step one
forward call (per parameter in training), and one backward call where the step has a
backward.
"""

from __future__ import annotations

import re

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.kernel_kinds import ELEMENTWISE, GEMM_OR_CONV
from aiprof.diagnose.compiled_host import (
    CONVOLUTION_BACKWARD_OP,
    CONVOLUTION_OP,
    TRAINING_LAUNCHES_PER_KERNEL,
    backward_spans,
    host_costs,
)
from aiprof.diagnose.compiled_kernels import kernels_per_row
from aiprof.trace import Trace

CUDNN_NORM = re.compile(r"^void cudnn::bn_(fw|bw)")
"""cuDNN's batch-norm kernels (``bn_fw_tr_1C11_singleread``, ``bn_bw_1C11_singleread``: FP32
NCHW training): normalizations, which Inductor generates like ATen's."""


def compiled_launches(trace: Trace, rows: np.ndarray, gpu_dur_us: dict[int, float],
                      fallback_launch_call_us: float,
                      runs: dict[int, np.ndarray] | None = None) -> dict[int, float]:
    """Per GPU op row: the host's cost before the launch of each kernel of ``rows`` (GPU ops of
    the compiled part) that ``gpu_dur_us`` does not remove; the first of each step also pays a
    forward call (without autograd's part in a step without a backward), the first in the
    backward a backward call."""
    gpu, rt, ops = trace.gpu_ops, trace.runtime, trace.cpu_ops
    gone = np.fromiter((r for r, d in gpu_dur_us.items() if d <= 0), np.int64)
    rows = np.unique(rows[(gpu.launch_row[rows] >= 0) & ~np.isin(rows, gone)])
    if not len(rows):
        return {}
    costs = host_costs(trace, fallback_launch_call_us)
    at = rt.ts_us[gpu.launch_row[rows]]
    backward = iv.contains(backward_spans(trace), at)
    training = bool(backward.any())
    generated = generated_kernel(trace, rows)
    kernels = (kernels_per_row(trace, rows, runs or {}) if training
               else np.full(len(rows), np.nan))
    kernels[np.isnan(kernels)] = TRAINING_LAUNCHES_PER_KERNEL if training else 1.0
    per_generated = costs.generated_launch_us * kernels
    op = gpu.op_row[rows]
    conv = np.append(trace.strings.mask(ops.name_id, CONVOLUTION_OP), False)[op]
    conv_backward = np.append(trace.strings.mask(ops.name_id, CONVOLUTION_BACKWARD_OP), False)[op]
    cost = np.where(generated, per_generated,
                    np.where(conv_backward, costs.convolution_backward_op_us,
                             np.where(conv, costs.convolution_op_us, costs.extern_op_us)))
    cost[~generated & ~first_of_their_op(op, at)] = 0.0  # one dispatch an op
    forward_call = costs.forward_call_us if training else costs.inference_call_us
    steps = trace.steps
    for lo, hi in zip(steps.start_us, steps.end_us, strict=True):
        mine = (at >= lo) & (at <= hi)
        for part, call_us in ((mine, forward_call), (mine & backward, costs.backward_call_us)):
            if part.any():
                first = np.flatnonzero(part)[int(np.argmin(at[part]))]
                cost[first] += call_us
    return dict(zip(rows.tolist(), cost.tolist(), strict=True))


def generated_kernel(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per GPU op of ``rows``: a kernel Inductor generates instead (memory-bound, or cuDNN's
    BatchNorm), not a library GEMM or convolution."""
    names = trace.gpu_ops.name_id[rows]
    return np.asarray((trace.strings.mask(names, ELEMENTWISE)
                       | trace.strings.mask(names, CUDNN_NORM))
                      & ~trace.strings.mask(names, GEMM_OR_CONV))


def first_of_their_op(op_rows: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per kernel: the first one (by launch time ``at``) its CPU op launched (a kernel with no
    op is its own)."""
    first = np.ones(len(op_rows), dtype=bool)
    known = np.flatnonzero(op_rows >= 0)
    order = known[np.lexsort((at[known], op_rows[known]))]
    first[order[1:][op_rows[order[1:]] == op_rows[order[:-1]]]] = False
    return first
