"""Which reductions Inductor splits into partial sums, and how it lays convolutions out.

The model (aiprof's reading of Inductor, torch 2.11-2.13). A reduction with few outputs has too
little parallelism for one kernel, so Inductor reduces in phases (``Reduction.num_splits`` in
``torch/_inductor/ir.py``, the split factor ``InductorChoices.reduction_split_factor`` in
``torch/_inductor/choices.py``): a kernel of partial sums, then one over them, again while the
partial sums are many. A BatchNorm's statistics (forward) and its weight and bias gradients
(backward) are such reductions: one output per channel, each over the batch and the spatial
positions; so are a linear layer's bias gradient (a ``sum`` over the rows) and layer norm's
weight gradients. Whether they split depends on the outputs, the elements each reduces, the
device's SMs and the layout: over a channels-last tensor (Inductor's layout optimization,
``layout_optimized``) the reduced dimensions are outer ones (every stride above 1), over an
NCHW tensor the spatial one is inner. The split factor is the size of every partial-sum buffer
the compiled conv steps of ``tests/data/diagnose/compiled*`` recorded for their BatchNorm
statistics kernels (41 widths of five steps: ResNet-34's 64-channel layers over 200,704
elements a channel write 1,024 partial sums, then 8, then the statistics, three kernels; its
512-channel ones 25, two; ResNet-18 at batch 4 splits all but its 512-channel layers, 64
elements a channel; ``tests/diagnose/test_compiled_reductions.py``). Measured, not in the
compile model (``docs/diagnose.md``'s ninth pass): ``compiled_kernels.part_count`` counts the
levels only when asked.
"""

from __future__ import annotations

import re
from math import isqrt, prod

import numpy as np

from aiprof.trace import Trace

WARP_SIZE = 32
"""Threads a warp on NVIDIA GPUs: Inductor's least elements a thread reduces
(``min_elements_per_thread = warp_size``)."""
MAX_THREADS_PER_SM = 2048
"""Threads an SM holds on the H100/H200 (compute capability 9.0; CUDA programming guide's
table of compute capabilities): Inductor's ``threads_per_sm``."""
MAX_ELEMENTS_PER_THREAD = 512
"""Inductor's most elements a thread reduces before it splits more (``choices.py``)."""
SPLIT_NUM_WARPS = 8
"""Warps of the block Inductor sizes an inner split for (``num_warps = 8``)."""
INNER_NO_SPLIT_ELEMENTS = 8192
"""An inner reduction over at most this many elements is never split (``no_split_threshold``
below compute capability 10)."""
OUTER_VALUES_PER_THREAD = 4
OUTER_VALUES_PER_BLOCK = 128
"""An outer reduction's values a thread reduces and outputs a block holds (``rvals_per_thread``,
``xvals_per_block`` in ``choices.py``)."""
OUTPUTS_PER_SM_NO_SPLIT = 2 * WARP_SIZE
"""At this many outputs an SM or more, no reduction splits (``numel_hint >= num_sm * 2 * 32``,
``ir.py``)."""


def split_factor(outputs: int, elements: int, num_sms: int, outer: bool) -> int:
    """Inductor's split of a reduction of ``outputs`` values, each over ``elements`` (1: one
    kernel; more: partial sums, then a kernel over them)."""
    if elements <= WARP_SIZE or outputs >= num_sms * OUTPUTS_PER_SM_NO_SPLIT:
        return 1
    least = WARP_SIZE * num_sms * MAX_THREADS_PER_SM
    most = MAX_ELEMENTS_PER_THREAD * num_sms * MAX_THREADS_PER_SM
    total = elements * outputs
    if not outer:
        threads = WARP_SIZE * SPLIT_NUM_WARPS
        if outputs >= 2 * num_sms or elements <= INNER_NO_SPLIT_ELEMENTS:
            return 1
        if total <= least:
            size = WARP_SIZE
        elif total < most:
            blocks = num_sms * MAX_THREADS_PER_SM // (2 * threads)
            per_output = -(-blocks // outputs)
            wanted = -(-elements // (threads * per_output))
            near = _nearest_divisor(elements, wanted)
            size = max(near, WARP_SIZE) if abs(near - wanted) < 30 else wanted
        else:
            size = _even_split(elements)
        return -(-elements // (size * threads))
    if total < least:
        size = WARP_SIZE
    elif total < most:
        blocks = num_sms * MAX_THREADS_PER_SM // (WARP_SIZE * SPLIT_NUM_WARPS)
        blocks = -(-blocks // -(-outputs // OUTER_VALUES_PER_BLOCK))
        wanted = -(-elements // (OUTER_VALUES_PER_THREAD * blocks))
        near = _nearest_divisor(elements, wanted)
        size = max(near, WARP_SIZE) if abs(wanted - near) < 20 else wanted
    else:
        size = _even_split(elements)
    return -(-elements // (OUTER_VALUES_PER_THREAD * size))


def _even_split(elements: int) -> int:
    near = _nearest_divisor(elements, MAX_ELEMENTS_PER_THREAD)
    return near if abs(near - MAX_ELEMENTS_PER_THREAD) < 50 else MAX_ELEMENTS_PER_THREAD


def _nearest_divisor(n: int, target: int) -> int:
    """The divisor of ``n`` nearest ``target`` (the smaller one on a tie)."""
    divisors = {d for i in range(1, isqrt(n) + 1) if n % i == 0 for d in (i, n // i)}
    return min(sorted(divisors), key=lambda d: abs(d - target))


BATCH_NORM_OP = re.compile(r"batch_norm")
"""ATen's BatchNorm ops, forward and backward (``aten::native_batch_norm``,
``aten::cudnn_batch_norm``, ``aten::native_batch_norm_backward``, ...): their first input is the
activation ``[N, C, ...]``."""
SUM_OP = re.compile(r"^aten::sum$")
"""``sum`` with its ``dim`` recorded among the concrete inputs (``['', '[0]', 'True', '']``)."""
LAYER_NORM_BACKWARD_OP = re.compile(r"layer_norm_backward")
"""``aten::native_layer_norm_backward``: its first input the output gradient ``[..., hidden]``;
its weight and bias gradients reduce over every row."""


def reduction_levels(outputs: int, elements: int, num_sms: int, outer: bool) -> int:
    """Kernels beyond one that Inductor spends on a reduction of ``outputs`` values, each over
    ``elements``: one per level of partial sums (``split_factor``; the partial sums are
    reduced again by the outer rule while they are many: the compiled ResNet-34's 64-channel
    statistics over 200,704 elements a channel go 1,024 partial sums -> 8 -> 1, three kernels;
    its 256-channel ones 98 -> 1, two)."""
    levels, factor = 0, split_factor(outputs, elements, num_sms, outer)
    while factor > 1:
        levels += 1
        factor = split_factor(outputs, factor, num_sms, True)
    return levels


def op_levels(trace: Trace, op: int, num_sms: int, channels_last: bool) -> int:
    """The levels of partial sums (``reduction_levels``) Inductor spends on the reduction of
    CPU op ``op``: a BatchNorm's per-channel one (over a channels-last tensor where
    ``channels_last``, the reduced dimensions then outer ones), a ``sum`` over leading
    dimensions (a bias gradient: outer), layer norm backward's weight and bias gradients (over
    the rows, outer); 0 for another op or without shapes."""
    ops = trace.cpu_ops
    if op < 0 or ops.input_dims_id[op] < 0:
        return 0
    name = trace.name(int(ops.name_id[op]))
    dims = trace.json_value(int(ops.input_dims_id[op]))
    first = dims[0] if isinstance(dims, list) and dims else None
    if not (isinstance(first, list) and len(first) >= 2
            and all(isinstance(v, int) and v > 0 for v in first)):
        return 0
    numel = prod(first)
    if LAYER_NORM_BACKWARD_OP.search(name):
        return reduction_levels(first[-1], numel // first[-1], num_sms, True)
    if BATCH_NORM_OP.search(name) and len(first) > 2:
        return reduction_levels(first[1], numel // first[1], num_sms, channels_last)
    if SUM_OP.match(name):
        reduced = leading_reduced(trace, op, len(first))
        if reduced:
            outputs = prod(first[reduced:])
            return reduction_levels(outputs, numel // outputs, num_sms, True)
    return 0


def leading_reduced(trace: Trace, op: int, rank: int) -> int:
    """How many leading dimensions ``aten::sum`` op ``op`` reduces, where its recorded ``dim``
    argument is exactly the first few (``[0]``, ``[0, 1]``); 0 otherwise."""
    ops = trace.cpu_ops
    args = trace.json_value(int(ops.concrete_inputs_id[op]))
    if not (isinstance(args, list) and len(args) > 1 and isinstance(args[1], str)):
        return 0
    text = args[1].strip("[] ")
    try:
        reduced = sorted(int(v) % rank for v in text.split(",")) if text else []
    except ValueError:
        return 0
    return len(reduced) if reduced and reduced == list(range(len(reduced))) \
        and len(reduced) < rank else 0


CONVOLUTION = re.compile(r"^aten::convolution$")
"""The graph's convolutions as the profiler records them (what ``decide_layout_opt`` reads):
input dims (input, weight, ...) and concrete inputs (the last one ``groups``)."""


def layout_optimized(trace: Trace) -> bool:
    """Whether Inductor lays a training graph's convolutions out channels-last
    (``GraphLowering.decide_layout_opt``, ``torch/_inductor/graph.py``): a graph with
    convolutions does, unless one is grouped with more than one input channel a group, one has
    at most half as many output channels as input ones and a kernel wider than 1 (the
    "pytorch_unet" skip), or every one has at most 64 input and output channels. The compiled
    steps agree: resnet18_b4, resnet34_nchw and efficientnet_b0 lost their cuDNN layout
    conversions (0.21 -> 0.03, 3.31 -> 0.04, 0.47 -> 0.00 ms a step), deeplabv3 (three ASPP
    convolutions 960 -> 256 wide 3) kept its 0.38 ms (``benchmarks/compiled_vs_eager.py``).
    Here it says only over which layout the BatchNorm reductions run."""
    ops = trace.cpu_ops
    rows = np.flatnonzero(trace.strings.mask(ops.name_id, CONVOLUTION))
    weights: list[tuple[list[int], int]] = []
    for r in rows.tolist():
        dims = trace.json_value(int(ops.input_dims_id[r]))
        args = trace.json_value(int(ops.concrete_inputs_id[r]))
        if not (isinstance(dims, list) and len(dims) > 1 and isinstance(dims[1], list)
                and len(dims[1]) > 2 and isinstance(args, list) and args):
            return False  # shapes not recorded: the choice cannot be read
        groups = int(args[-1]) if str(args[-1]).isdigit() else 1
        weights.append(([int(v) for v in dims[1]], groups))
    if not weights:
        return False
    grouped = any(g > 1 and w[1] > 1 for w, g in weights)
    in_out = any(w[0] * 2 <= w[1] and w[2] > 1 for w, _ in weights)
    small = all(w[0] <= 64 and w[1] <= 64 for w, _ in weights)
    return not (grouped or in_out or small)
