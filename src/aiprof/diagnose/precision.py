"""What the FP32 kernels of a trace would take on the TF32 and the BF16 (autocast) paths.

The model (aiprof's), per kernel actually in the trace:

- **TF32** (``allow_tf32``): the FP32 CUDA-core GEMM/conv kernels run on tensor cores at the
  same share of the TF32 peak as they reached of the FP32 peak: duration x peak FP32 / peak
  TF32 (dense peaks: measured ceilings, else the datasheet). Nothing else changes: TF32 is a
  math mode of cuBLAS matmuls and cuDNN convolutions only (``tf32_rows``), the two flags
  ``torch.backends.cuda.matmul.allow_tf32`` and ``torch.backends.cudnn.allow_tf32`` (PyTorch's
  "TensorFloat-32 (TF32) on Ampere (and later) devices"). So three kinds of FP32 kernel stay
  as they are: fused attention (``aten::_efficient_attention_*``, ``_flash_attention_*``,
  ``_cudnn_attention_*``: its kernel is picked by the dtype, neither flag reaches it);
  PyTorch's own depthwise convolutions (``conv_depthwise2d_*``, CUDA-core code that no flag
  reaches); and the FP32 kernels of a library whose flag was already on, which the trace shows
  by an FP32 op of the same library (convolutions: cuDNN; matmuls: cuBLAS) that ran on tensor
  cores: with TF32 allowed, the library chose the FP32 kernel itself (a 3-channel first
  convolution, a small dgrad), and turning the flag on again changes nothing. PyTorch's
  defaults allow TF32 in cuDNN and not in cuBLAS, so on a conv net TF32 usually moves only the
  matmuls.
- **BF16 autocast**: those GEMM/conv kernels at the BF16 peak instead (duration x peak FP32 /
  peak BF16), *and* the memory-bound kernels (elementwise, reductions, normalizations) of ops
  that ran on float32 tensors move half the bytes: their inputs and outputs are bf16, the
  output of the GEMM/conv before them (not the optimizer's update of the float32 weights,
  inside ``Optimizer.step``). Ops that autocast keeps in float32 (softmax, layer_norm,
  losses, reductions: the PyTorch AMP documentation, "CUDA Ops that can autocast to float32")
  read bf16 and write float32: three quarters of the bytes. A memory-bound kernel's time is
  its bytes over the bandwidth it reaches, which the halving keeps. The casts autocast adds
  (a weight copy per GEMM per step) are not modelled. Without record_shapes (no input types)
  only the GEMM/conv part applies and the evidence says so.
- **Split-K** (both paths): cuBLASLt runs a GEMM whose output has too few tiles to fill the GPU
  with its K split across CTAs, then a second kernel (``splitKreduce_kernel``) that sums the
  partial outputs. The algorithm is chosen per compute type, so the new path chooses anew: a
  split pays only where the GEMM outlasts the reduction it adds, so a GEMM that the new path
  runs in less time than its reduction kernel runs unsplit. Its reduction goes, with its
  launch: the host time from the end of the GEMM's launch call to the end of the reduction's
  (the library's setup of the second kernel and the call). A reduction that stays keeps its
  duration: it moves the FP32 partials, whose bytes no math mode changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.gpu_window import gpu_window
from aiprof.analysis.kernel_kinds import ELEMENTWISE, GEMM_OR_CONV, TENSOR_CORE
from aiprof.analysis.tensor_cores import TensorCoreResult, fp32_op
from aiprof.diagnose.nhwc import ATEN_DEPTHWISE_KERNEL
from aiprof.trace import Trace

AUTOCAST_FP32 = frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "native_group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity",
    "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d", "nll_loss_forward",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist",
    "renorm", "logsumexp", "softmax", "log_softmax", "cumprod", "cumsum", "prod", "sum",
    "norm", "linalg_vector_norm", "cross_entropy_loss", "mean", "var", "std",
})
"""Ops autocast runs in float32 on CUDA (PyTorch AMP documentation, "CUDA Ops that can autocast
to float32"; the reductions they lower to included); their backward ops count with them."""
FUSED_ATTENTION_OP = re.compile(r"attention", re.I)
"""Ops of fused attention kernels (``aten::_efficient_attention_forward``,
``aten::_flash_attention_backward``, ``aten::_cudnn_attention_forward``,
``aten::_scaled_dot_product_*``): their kernel follows the dtype, not ``allow_tf32``."""
CONV_OP = re.compile(r"conv", re.I)
"""Ops whose kernels cuDNN (or PyTorch's own convolution code) runs, against cuBLAS's
matmuls: which of the two TF32 flags reaches them."""
HALF_BYTES = 0.5
"""bf16 (2 bytes) in place of float32 (4 bytes) for every input and output."""
FP32_OUT_BYTES = 0.75
"""bf16 inputs, float32 output: (2 + 4) / (4 + 4) for a one-input, one-output kernel."""
SPLIT_K_REDUCE = re.compile(r"splitKreduce", re.I)
"""cuBLASLt's split-K reduction kernel (``cublasLt::splitKreduce_kernel<...>``)."""


@dataclass(frozen=True)
class MemoryBoundFp32:
    """Memory-bound kernels of float32 ops inside the steps and their bf16 byte factor."""

    rows: np.ndarray
    factor: np.ndarray
    typed: bool
    """Whether the trace recorded input types (without them no kernel can be placed)."""


def op_base_name(name: str) -> str:
    """``aten::_softmax_backward_data`` -> ``softmax``; ``aten::native_layer_norm`` kept."""
    base = name.split("::")[-1].lstrip("_")
    for suffix in ("_backward_data", "_backward", "_forward", "_out"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base.lstrip("_")


def memory_bound_fp32(trace: Trace) -> MemoryBoundFp32:
    """Elementwise/reduction/normalization kernels launched by ops with float32 inputs."""
    win = gpu_window(trace)
    ops = trace.gpu_ops
    rows = win.rows[win.rows < len(trace.kernels)]
    ids = ops.name_id[rows]
    light = trace.strings.mask(ids, ELEMENTWISE) & ~trace.strings.mask(ids, GEMM_OR_CONV)
    rows = rows[light & (ops.op_row[rows] >= 0)]
    rows = rows[~_in_optimizer(trace, rows)]
    typed = bool(np.any(trace.cpu_ops.input_types_id >= 0))
    if not typed or len(rows) == 0:
        return MemoryBoundFp32(rows[:0], np.zeros(0), typed)
    op_rows, inverse = np.unique(ops.op_row[rows], return_inverse=True)
    is_fp32 = np.array([fp32_op(trace, int(r)) for r in op_rows], dtype=bool)
    keeps_fp32 = np.array([
        op_base_name(trace.name(int(trace.cpu_ops.name_id[r]))) in AUTOCAST_FP32
        for r in op_rows
    ], dtype=bool)
    factor = np.where(keeps_fp32, FP32_OUT_BYTES, HALF_BYTES)[inverse]
    pick = is_fp32[inverse]
    return MemoryBoundFp32(rows[pick], factor[pick], typed)


def _in_optimizer(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per kernel: launched inside ``Optimizer.step``/``zero_grad`` (the float32 master
    weights' update, which autocast does not touch)."""
    ann, rt = trace.annotations, trace.runtime
    names = [trace.name(int(i)) for i in ann.name_id]
    pick = np.array([n.startswith("Optimizer.") for n in names], dtype=bool)
    if not pick.any() or len(rows) == 0:
        return np.zeros(len(rows), dtype=bool)
    spans = iv.union(ann.ts_us[pick], ann.ts_us[pick] + ann.dur_us[pick])
    launch = trace.gpu_ops.launch_row[rows]
    at = np.where(launch >= 0, rt.ts_us[np.maximum(launch, 0)], -np.inf)
    return iv.contains(spans, at)


def precision_durations(
    trace: Trace, gemm_rows: np.ndarray, gemm_factor: float, memory: MemoryBoundFp32 | None,
) -> dict[int, float]:
    """New durations: the FP32 GEMM/conv kernels x ``gemm_factor``, and (for BF16) the
    memory-bound float32 kernels x their byte factor. PyTorch's depthwise convolution kernels
    among ``gemm_rows`` stay on CUDA cores in half precision: memory-bound, half the bytes.
    A split-K reduction among them goes where its GEMM runs unsplit on the new path
    (``unsplit``), else keeps its duration (it moves FP32 partials)."""
    dur = trace.gpu_ops.dur_us
    depthwise = trace.strings.mask(trace.gpu_ops.name_id[gemm_rows], ATEN_DEPTHWISE_KERNEL)
    factor = np.where(depthwise, HALF_BYTES, gemm_factor)
    reduce = trace.strings.mask(trace.gpu_ops.name_id[gemm_rows], SPLIT_K_REDUCE)
    factor = np.where(reduce, 1.0, factor)
    new = {int(r): float(dur[r]) * float(f)
           for r, f in zip(gemm_rows.tolist(), factor.tolist(), strict=True)}
    new.update({int(r): 0.0 for r in unsplit(trace, gemm_rows, gemm_factor).reduce_rows.tolist()})
    if memory is not None:
        new.update({int(r): float(dur[r]) * float(f)
                    for r, f in zip(memory.rows.tolist(), memory.factor.tolist(), strict=True)})
    return new


@dataclass(frozen=True)
class SplitK:
    """Split-K GEMMs: each reduction kernel and the GEMM kernel it sums (same rows order)."""

    gemm_rows: np.ndarray
    reduce_rows: np.ndarray


def split_k(trace: Trace, rows: np.ndarray) -> SplitK:
    """The split-K pairs among ``rows``: a reduction kernel and the kernel its CPU op ran just
    before it (cuBLASLt launches the two back to back from the one matmul op)."""
    ops = trace.gpu_ops
    rows = rows[ops.op_row[rows] >= 0]
    rows = rows[np.lexsort((ops.ts_us[rows], ops.op_row[rows]))]
    reduce = trace.strings.mask(ops.name_id[rows], SPLIT_K_REDUCE)
    same_op = ops.op_row[rows][1:] == ops.op_row[rows][:-1]
    at = np.flatnonzero(reduce[1:] & ~reduce[:-1] & same_op) + 1
    return SplitK(rows[at - 1], rows[at])


def unsplit(trace: Trace, rows: np.ndarray, gemm_factor: float) -> SplitK:
    """The split-K pairs among ``rows`` that the new path runs unsplit: the GEMM x
    ``gemm_factor`` shorter than its own reduction kernel, which a split cannot repay."""
    pairs = split_k(trace, rows)
    dur = trace.gpu_ops.dur_us
    keep = dur[pairs.gemm_rows] * gemm_factor < dur[pairs.reduce_rows]
    return SplitK(pairs.gemm_rows[keep], pairs.reduce_rows[keep])


def reduce_launch_spans(trace: Trace, rows: np.ndarray, gemm_factor: float) -> iv.Intervals:
    """Host time of the reductions that go (``unsplit``): from the end of each GEMM's launch
    call to the end of its reduction's, on the same thread (the library's setup of the second
    kernel, and its launch call)."""
    pairs = unsplit(trace, rows, gemm_factor)
    rt, launch = trace.runtime, trace.gpu_ops.launch_row
    gemm, reduce = launch[pairs.gemm_rows], launch[pairs.reduce_rows]
    ok = (gemm >= 0) & (reduce >= 0)
    gemm, reduce = gemm[ok], reduce[ok]
    ok = (rt.tid[gemm] == rt.tid[reduce]) & (rt.end_us[gemm] <= rt.ts_us[reduce])
    return iv.union(rt.end_us[gemm[ok]], rt.end_us[reduce[ok]])


def tf32_rows(trace: Trace, tc: TensorCoreResult) -> np.ndarray:
    """The FP32 GEMM/conv kernels that turning TF32 on would move to tensor cores (see the
    module docstring): not fused attention, not PyTorch's depthwise kernels, not those of a
    library (cuDNN, cuBLAS) that already ran an FP32 op on tensor cores in this trace."""
    rows = tc.fp32_rows
    if len(rows) == 0:
        return rows
    ops, cpu = trace.gpu_ops, trace.cpu_ops
    op_names = trace.strings.mask(cpu.name_id, FUSED_ATTENTION_OP)
    conv_ops = trace.strings.mask(cpu.name_id, CONV_OP)

    def per_kernel(mask: np.ndarray, kernel_rows: np.ndarray) -> np.ndarray:
        op = ops.op_row[kernel_rows]
        if len(mask) == 0:  # no CPU ops recorded
            return np.zeros(len(op), dtype=bool)
        return np.where(op >= 0, mask[np.clip(op, 0, len(mask) - 1)], False)

    attention = per_kernel(op_names, rows)
    depthwise = trace.strings.mask(ops.name_id[rows], ATEN_DEPTHWISE_KERNEL)
    conv = per_kernel(conv_ops, rows)
    tf32_conv, tf32_matmul = _tf32_already(trace, tc, conv_ops)
    already = np.where(conv, tf32_conv, tf32_matmul)
    kept: np.ndarray = rows[~attention & ~depthwise & ~already]
    return kept


def _tf32_already(trace: Trace, tc: TensorCoreResult, conv_ops: np.ndarray) -> tuple[bool, bool]:
    """Whether an FP32 conv op, and an FP32 matmul op, ran a tensor-core kernel (TF32 on)."""
    ops = trace.gpu_ops
    fp32 = np.isin(tc.gemm_rows, tc.fp32_rows)
    rows = tc.gemm_rows[~fp32 & trace.strings.mask(ops.name_id[tc.gemm_rows], TENSOR_CORE)]
    rows = rows[ops.op_row[rows] >= 0]
    op_rows = np.unique(ops.op_row[rows])
    typed = np.array([fp32_op(trace, int(r)) for r in op_rows], dtype=bool)
    if not typed.any():
        return False, False
    conv = conv_ops[op_rows[typed]]
    return bool(conv.any()), bool((~conv).any())
