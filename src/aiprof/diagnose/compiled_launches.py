"""The host's side of a compiled step: what the generated code costs before each kernel.

Applies ``compiled_host``'s costs (in units of the trace's own launch call) to the kernels the
compiled part of an eager step still launches: per memory-bound kernel Inductor generates a
Triton launch; in a step with a backward, per kept kernel the Triton kernels of its run's parts
(``compiled_kernels``: one per element count and per reduction; ``TRAINING_LAUNCHES_PER_KERNEL``
where the trace has no shapes), in one without, one; per extern
op (a GEMM, an ATen fallback; a convolution costs its own, a backward one about three forward
ones) one call of it from the wrapper, whatever number of kernels it launches (in a training
step a non-causal SDPA forward is its math decomposition's two GEMMs and five generated
kernels, its backward four and five); an op Inductor generates launches none of ATen's
helper kernels for it (``helper_kernel``: a reduction's memset); per call of the model
(``compiled_host.calls_per_step``: once a step, or once per use of its weights, a policy called
per environment step) one forward graph call (per parameter in training), and one backward
call where the step has a backward.
"""

from __future__ import annotations

import re

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.kernel_kinds import ELEMENTWISE, GEMM_OR_CONV
from aiprof.analysis.sdpa_calls import causal, sdpa_rows
from aiprof.diagnose.compiled_host import (
    CONVOLUTION_BACKWARD_OP,
    CONVOLUTION_OP,
    TRAINING_LAUNCHES_PER_KERNEL,
    backward_spans,
    calls_per_step,
    host_costs,
)
from aiprof.diagnose.compiled_kernels import kernels_per_row
from aiprof.trace import Trace

CUDNN_NORM = re.compile(r"^void cudnn::bn_(fw|bw)")
"""cuDNN's batch-norm kernels (``bn_fw_tr_1C11_singleread``, ``bn_bw_1C11_singleread``: FP32
NCHW training): normalizations, which Inductor generates like ATen's."""

FUSED_ATTENTION_FORWARD = re.compile(r"^aten::_(efficient|flash|cudnn)_attention_forward$")
FUSED_ATTENTION_BACKWARD = re.compile(r"^aten::_(efficient|flash|cudnn)_attention_backward$")
"""The ops that launch ``scaled_dot_product_attention``'s fused kernels (memory-efficient,
flash, cuDNN), forward and backward."""
MATH_ATTENTION_FORWARD_GEMMS = 2
"""Extern GEMMs of a compiled training step per SDPA forward: Inductor ran SDPA's math
decomposition (``bmm`` of the scores, a generated ``_safe_softmax`` kernel with the mask and
dropout, ``bmm`` with V) in each of the three compiled training steps with SDPA
(``tests/data/diagnose/compiled``, ``compiled_second``: bert_small 24 ``aten::bmm`` a step for 4
layers, vit_small 36 for 6, distilbert 36 for 6, no fused attention kernel left; the compiled
inference step llama_tiny kept its cuDNN attention). Applied where every SDPA call is
non-causal, as theirs were (``math_attention``)."""
MATH_ATTENTION_BACKWARD_GEMMS = 4
"""Extern GEMMs per SDPA backward under the same decomposition: the gradients of the two
``bmm`` (two each) (the same three steps: six ``bmm`` a layer in all)."""
MATH_ATTENTION_GENERATED_KERNELS = 5
"""Triton kernels per SDPA forward, and per backward, under the same decomposition: the
softmax (its backward) and four layout copies, Q, K and V into the ``bmm``'s
``[batch x heads, seq, dim]`` and the output back (the gradients likewise): the same three
steps launch 4 ``triton_*clone*transpose*`` kernels a layer inside the forward graph call and
4 inside the backward one, and one softmax kernel a layer each way (vit_small's backward two:
a split reduction)."""


def compiled_launches(trace: Trace, rows: np.ndarray, gpu_dur_us: dict[int, float],
                      fallback_launch_call_us: float,
                      runs: dict[int, np.ndarray] | None = None) -> dict[int, float]:
    """Per GPU op row: the host's cost before the launch of each kernel of ``rows`` (GPU ops of
    the compiled part) that ``gpu_dur_us`` does not remove; per call of the model a step makes
    (``calls_per_step``), a kernel of the forward also pays a forward call (without autograd's
    part in a step without a backward), one of the backward a backward call."""
    gpu, rt, ops = trace.gpu_ops, trace.runtime, trace.cpu_ops
    gone = np.fromiter((r for r, d in gpu_dur_us.items() if d <= 0), np.int64)
    rows = np.unique(rows[gpu.launch_row[rows] >= 0])
    helper = helper_kernel(trace, rows)
    rows = rows[~np.isin(rows, gone) & ~helper]
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
    if training and math_attention(trace):  # SDPA's math decomposition: GEMMs and Triton
        forward, backward_op = (np.append(trace.strings.mask(ops.name_id, pattern), False)[op]
                                for pattern in (FUSED_ATTENTION_FORWARD,
                                                FUSED_ATTENTION_BACKWARD))
        cost[forward] = (MATH_ATTENTION_FORWARD_GEMMS * costs.extern_op_us
                         + MATH_ATTENTION_GENERATED_KERNELS * costs.generated_launch_us)
        cost[backward_op] = (MATH_ATTENTION_BACKWARD_GEMMS * costs.extern_op_us
                             + MATH_ATTENTION_GENERATED_KERNELS * costs.generated_launch_us)
    cost[~generated & ~first_of_their_op(op, at)] = 0.0  # one dispatch an op
    forward_call = costs.forward_call_us if training else costs.inference_call_us
    calls = calls_per_step(trace)
    steps = trace.steps
    for lo, hi in zip(steps.start_us, steps.end_us, strict=True):
        mine = (at >= lo) & (at <= hi)
        for part, call_us in ((mine & ~backward, forward_call),
                              (mine & backward, costs.backward_call_us)):
            cost[call_starts(part, at, calls)] += call_us
    return dict(zip(rows.tolist(), cost.tolist(), strict=True))


def call_starts(part: np.ndarray, at: np.ndarray, calls: int) -> np.ndarray:
    """Indices of the kernels that pay a graph call: of those where ``part``, in launch order
    (``at``), the first of each of ``calls`` groups of equal size (fewer where fewer kernels;
    where the step has no forward kernel, none)."""
    order = np.flatnonzero(part)[np.argsort(at[part], kind="stable")]
    if not len(order):
        return order
    return order[np.unique(np.arange(calls) * len(order) // calls)]


def math_attention(trace: Trace) -> bool:
    """Whether the trace's SDPA calls are all non-causal (``is_causal`` recorded False on every
    ``aten::scaled_dot_product_attention``): the three compiled training steps whose SDPA
    Inductor ran as its math decomposition were (bert_small, vit_small, distilbert); no
    compiled causal training step is recorded (gpt2_vocab and llama_fp32's SDPA are causal),
    so a causal one keeps its fused kernels' one call."""
    rows = sdpa_rows(trace)
    return bool(len(rows)) and all(causal(trace, r) is False for r in rows.tolist())


def helper_kernel(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per GPU op of ``rows``: a helper launch of an op Inductor generates, which the
    generated code does not make: neither a generated kernel nor a library one, launched by an
    op that also launched a generated kernel among ``rows`` (fused away or kept): the
    ``Memset`` of the semaphores ATen's large ``reduce_kernel`` sums with (``Reduce.cuh``'s
    global reduction), the weight-gradient kernel of ``native_layer_norm_backward``
    (``GammaBetaBackward``) beside its input-gradient one. Inductor lowers the op to Triton
    kernels (the generated row's parts count them): the compiled steps of
    ``tests/data/diagnose/compiled`` launch 1 memset a step against the eager steps' 45
    (bert_small), 8 against 46 (vit_small)."""
    gpu = trace.gpu_ops
    op = gpu.op_row[rows]
    generated = generated_kernel(trace, rows)
    library = trace.strings.mask(gpu.name_id[rows], GEMM_OR_CONV)
    generated_ops = np.unique(op[generated & (op >= 0)])
    return np.asarray(~generated & ~library & (op >= 0) & np.isin(op, generated_ops))


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
