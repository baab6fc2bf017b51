"""How many Triton kernels Inductor generates for what an eager step ran as memory-bound kernels.

The model (aiprof's). Inductor fuses pointwise work over one iteration space into one kernel,
and a reduction with its pointwise producers; what it cannot put in one kernel: work over
another number of elements (a BatchNorm's ``num_batches_tracked += 1`` or its running
statistics beside the activation, an autocast weight cast beside the activation it multiplies),
and what consumes a reduction's result over the reduced tensor (a normalization reads its
statistics: a reduction, then a pointwise kernel). So a run of memory-bound kernels the eager
step launched between two extern kernels (``compiled.compiled_runs``) becomes one kernel per
distinct element count among its members' ops plus one per reduction among them ("parts");
a lone memory-bound kernel is one part, two if it is a reduction. The compiled step's Triton
kernels per part, measured on the compiled steps of ``tests/data/diagnose/compiled*``, stand
for what the count leaves out (split reductions, a backward's extra passes, fusion across
members of equal size that this count keeps apart).
"""

from __future__ import annotations

import re
from math import prod

import numpy as np

from aiprof.diagnose.compiled_reductions import LAYER_NORM_BACKWARD_OP, layout_optimized, op_levels
from aiprof.trace import Trace

REDUCTION_KERNEL = re.compile(
    r"reduce_kernel|collect_statistics|batch_norm_backward_reduce|batch_norm_backward_kernel"
    r"|^void cudnn::bn_(fw_tr|bw)|[Ww]elford")
"""ATen's and cuDNN's reduction kernels among the memory-bound ones: ``reduce_kernel``
(``aten/src/ATen/native/cuda/Reduce.cuh``), BatchNorm's statistics and its backward's sums
(``Normalization.cuh``), cuDNN's training BatchNorm (``bn_fw_tr_*``, ``bn_bw_*``), Welford
variance."""
TRAINING_KERNELS_PER_PART = 1.14
"""Triton kernels a compiled training step launches per part of its eager step's model
(``part_count``): median of the seven compiled training steps that compiled the whole step
(resnet18_b4 1.07, deeplabv3 0.90, bert_small 1.45, vit_small 1.47, resnet34 1.43,
distilbert 1.14, efficientnet_b0 1.03; ``tests/data/diagnose/compiled``, ``compiled_second``,
``compiled_third``; ``benchmarks/compiled_vs_eager.py``). Kernels per kept kernel instead
vary 1.56-4.70 on them. On the three compiled inference steps parts explain the count no
better than kept kernels do (0.52-0.96 per part, 1.32-1.93 per kept kernel), so a step without
a backward keeps one launch per kept kernel (``compiled_launches``)."""


def kernels_per_row(trace: Trace, rows: np.ndarray, runs: dict[int, np.ndarray]
                    ) -> np.ndarray:
    """Per GPU op of ``rows`` (memory-bound kernels a compiled training step keeps): the
    Triton kernels it stands for, the parts of its run (``runs``: kept row to the run's rows)
    or its own, times ``TRAINING_KERNELS_PER_PART``; NaN where no op has recorded shapes."""
    out = np.empty(len(rows))
    for i, row in enumerate(rows.tolist()):
        parts = part_count(trace, runs.get(row, np.array([row], dtype=np.int64)))
        out[i] = TRAINING_KERNELS_PER_PART * parts if parts is not None else np.nan
    return out


def split_reduction_ops(trace: Trace) -> np.ndarray:
    """Per CPU op of a training step's trace (and a last entry for a GPU op without one): the
    levels of partial sums Inductor spends on its reduction (``compiled_reductions.op_levels``:
    a BatchNorm's, over channels-last tensors where Inductor lays the convolutions out so,
    ``layout_optimized``; a bias gradient's ``sum``; layer norm backward's weight gradients);
    none where the trace does not say the device's SMs."""
    ops = trace.cpu_ops
    out = np.zeros(len(ops) + 1, dtype=np.int64)  # the last: a GPU op without a CPU op (-1)
    device = trace.device
    if device is None or not device.num_sms:
        return out
    gpu = trace.gpu_ops
    reductions = gpu.op_row[trace.strings.mask(gpu.name_id, REDUCTION_KERNEL)
                            | trace.strings.mask(ops.name_id, LAYER_NORM_BACKWARD_OP)[gpu.op_row]]
    outer = layout_optimized(trace)
    for op in np.unique(reductions[reductions >= 0]).tolist():
        out[op] = op_levels(trace, int(op), int(device.num_sms), outer)
    return out


def part_count(trace: Trace, rows: np.ndarray, split: np.ndarray | None = None) -> int | None:
    """Kernels Inductor needs for ``rows`` (one fused run, or one kernel): distinct element
    counts among their ops (the largest input of each) plus their reductions, plus, with
    ``split`` (``split_reduction_ops``), the levels of partial sums of their ops' reductions,
    each op once; None where no row's op has recorded shapes."""
    sizes = {size for size in (op_elements(trace, int(op)) for op in trace.gpu_ops.op_row[rows])
             if size is not None}
    if not sizes:
        return None
    names = trace.gpu_ops.name_id[rows]
    reduction = trace.strings.mask(names, REDUCTION_KERNEL)
    splits = 0
    if split is not None:
        op = trace.gpu_ops.op_row[rows]
        splits = int(split[np.unique(op[reduction | (split[op] > 0)])].sum())
    return len(sizes) + int(np.count_nonzero(reduction)) + splits


def op_elements(trace: Trace, op: int) -> int | None:
    """Elements of the largest input of CPU op ``op`` (None without recorded shapes)."""
    ops = trace.cpu_ops
    if op < 0 or ops.input_dims_id[op] < 0:
        return None
    dims = trace.json_value(int(ops.input_dims_id[op]))
    sizes = [prod(d) for d in dims or [] if isinstance(d, list)
             and all(isinstance(v, int) for v in d)]  # a 0-d tensor: one element
    return max(sizes) if sizes else None
