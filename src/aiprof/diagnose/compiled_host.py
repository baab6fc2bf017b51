"""What a ``torch.compile``'d step still costs the host: per kernel it launches, per graph call.

The model (aiprof's), from traces of compiled steps. Under ``torch.compile`` (default mode, no
CUDA graphs) the eager dispatch of the compiled model is gone: the modules' Python, the
dispatcher's per-op work, autograd's bookkeeping. What replaces it:

- **Per kernel launched**, the generated wrapper's Python: for a kernel Inductor generates
  (Triton), its ``CachingAutotuner.run`` and launcher, then ``cuLaunchKernel``; for an extern
  op (a cuBLAS GEMM, a cuDNN convolution, an ATen fallback) the ATen call the wrapper makes
  (the dispatcher without autograd) and its kernels' launches; the buffers it allocates. A
  convolution's backward (``aten::convolution_backward``: the input and the weight gradients,
  two cuDNN calls with their engines and plans) costs about three forward convolutions.
- **Per call of a compiled graph**: Dynamo's guards (``TorchDynamo Cache Lookup``), the
  AOTAutograd runtime wrapper and its autograd function (``CompiledFunction``), the generated
  call's prologue (a size and stride check per input), forward; the
  ``CompiledFunctionBackward`` node and its wrapper, backward.

So the host time of the compiled part of a step is ``calls x per-call cost + launches x
per-launch cost``, whatever the eager dispatch cost: where the eager step's ops were cheap to
dispatch (C++ autograd in the backward, small tensor ops) and fusion removes few launches, the
compiled step is slower on the host (``rl_policy_rollout``, ``resnet18_b4_train``: measured
-38.8% and -8.1%).

The costs are read off plain ``torch.profiler`` traces of one compiled step (``measure``): the
interval from one op's last launch call to the next one's, inside a graph call (``## Call
CompiledFxGraph`` annotations), is that op's cost, the profiler's cost per recorded event in it
taken out (``profiler_cost.estimated_overhead_us``); a call's cost is its region's time beyond
its ops' intervals, likewise. They are Python and driver work, so they scale with the host's
speed, which moves within a day on one machine (the H200's host: the same policy's eager ops
took twice as long in one recording as in another, and so did its launch calls). So each cost
is kept in units of the trace's own median ``cudaLaunchKernel`` call (``launch_call_us``) and
applied in the units of the trace diagnosed. The constants are the medians over the six
compiled steps of ``tests/data/diagnose/compiled`` (one H200 host, torch 2.11, 2026-12-01,
``scripts/h200/compiled_steps.py``; ``tests/diagnose/test_compiled_host.py`` recomputes them);
the convolutions' over every compiled step with convolutions, those of
``tests/data/diagnose/compiled_second`` (recorded later the same day) included; the forward
call's over the training steps of all three folders (``compiled_third``: 2026-12-02), per
parameter: Dynamo's guards, the runtime wrapper and the generated call's prologue touch every
graph input, and a training forward call cost 31 launch calls with 8 parameters, 299 with 213.

What the constants keep of the profiler: under it, Inductor wraps every Triton launch in a
record function with its arguments' shapes, strides and types (``CachingAutotuner.run``, only
while profiling), so a compiled trace's intervals hold more of the profiler's cost than the
nesting estimate takes out (distilbert_sync's compiled step: 41.97 ms profiled, 23.5 ms timed);
the eager launch call the constants are applied in holds its own share, and how much each trace
holds differs (docs/diagnose.md, the tenth pass: a model that counted exactly what the compiled
steps' graph calls cost would meet fewer compile truths than this one).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.diagnose.profiler_cost import estimated_overhead_us
from aiprof.trace import Trace

GENERATED_LAUNCH_CALLS = 4.58
"""Host time per Triton kernel the generated code launches, in launch calls: median of the six
compiled steps' medians (2.35-7.0; 26.0-48.1 µs; ``measure``, ``tests/data/diagnose/compiled``)."""
EXTERN_OP_CALLS = 4.18
"""Host time per extern op other than a convolution (a GEMM, an ATen fallback: its kernels)
the generated code calls, in launch calls: median of the six compiled steps' medians
(2.11-11.95; 23.3-92.9 µs; ``measure``)."""
CONVOLUTION_OP_CALLS = 3.53
"""Host time per extern forward convolution op (``aten::convolution``/``cudnn_convolution``: one
cuDNN call), in launch calls: median of the four compiled steps with convolutions in either
folder (``tests/data/diagnose/compiled`` and ``compiled_second``: 0.96 mobilenet_v3_small,
3.38 resnet34, 3.67 resnet18_b4, 5.23 deeplabv3; ``measure``)."""
CONVOLUTION_BACKWARD_OP_CALLS = 10.45
"""Host time per extern ``aten::convolution_backward`` op, in launch calls: median of the four
compiled training steps with convolutions (6.99 vit_small, 7.98 resnet18_b4, 12.92 deeplabv3,
15.15 resnet34; ``measure``): the input and the weight gradients are two cuDNN calls, each
with its engine and plan, so a backward convolution costs the host about three forward ones."""
FORWARD_CALL_BASE_CALLS = 21.8
"""A compiled training forward call's cost without parameters, in launch calls: the
Theil-Sen line's intercept (the median of ``call - slope x parameters``) over the nine compiled
training steps of ``tests/data/diagnose/compiled``, ``compiled_second`` and ``compiled_third``
(``measure``; 8-213 parameters, 31-299 launch calls)."""
FORWARD_CALL_PER_PARAMETER_CALLS = 1.18
"""A compiled training forward call's cost per parameter (``AccumulateGrad`` per step: each
parameter is an input of the graph, which Dynamo's guards, the AOTAutograd runtime wrapper and
the generated call's size and stride checks each touch), in launch calls: the Theil-Sen slope
(median of the pairwise slopes) over the same nine steps (``measure``). It predicts them within
15% at the median (vit_small, whose launch calls were slow for its host, 2.0x over), against
41% for the median call of the first six steps (74.5: deeplabv3's 254, efficientnet_b0's 299)."""
INFERENCE_CALL_CALLS = 57.6
"""Host time per call of a compiled forward graph without autograd (inference), in launch
calls: median of the two compiled inference steps with a launch call (52.9 mobilenet_v3_small,
62.3 resnet50_pageable_bf16; ``measure``, ``compiled_second``, ``compiled_third``); the
first six steps' median training call less its autograd function's part (``CompiledFunction``
beyond its graph call, median 20.7), 53.8, predicted them within 15%."""
BACKWARD_CALL_CALLS = 54.0
"""Host time per call of a compiled backward graph beyond its ops', in launch calls: median of
the six compiled steps' medians (19-99; 139-733 µs; ``measure``)."""
TRAINING_LAUNCHES_PER_KERNEL = 2.8
"""Triton kernels a compiled training step launches per memory-bound kernel (or run of them)
its eager step's model keeps (``compiled.fused_durations``): 2.53-3.32 on the four compiled
training steps that compiled the whole step (bert_small 149 for 59, deeplabv3 504 for 152,
resnet18_b4 153 for 58, vit_small 217 for 73; median 2.8): the forward writes what the
backward reads, large reductions are split in two, and the backward's reductions (bias and
normalization gradients) are kernels of their own. Not measured on inference."""

CONVOLUTION_OP = re.compile(r"convolution")
"""ATen's convolution ops (``aten::convolution``, ``aten::cudnn_convolution``,
``aten::convolution_backward``)."""
CONVOLUTION_BACKWARD_OP = re.compile(r"convolution_backward")
"""The backward ones (``aten::convolution_backward``: input and weight gradients)."""
LAUNCH_CALL = re.compile(r"^(cuda|hip)LaunchKernel$")
"""The runtime's kernel-launch call: the unit of the costs."""
GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph")
"""Inductor's annotation of one call of a compiled graph (``CompiledFxGraph.__call__``)."""
FORWARD_REGION = re.compile(r"^Torch-Compiled Region")
"""Dynamo's span of a call of a compiled frame (guards, runtime wrapper, forward graph)."""
BACKWARD_REGION = re.compile(r"^CompiledFunctionBackward$")
"""The autograd node of a compiled graph's backward."""
AUTOGRAD_FUNCTION_REGION = re.compile(r"^CompiledFunction$")
"""The autograd function of a compiled forward (inside ``FORWARD_REGION``)."""
TRITON_KERNEL = re.compile(r"^triton_")
AUTOGRAD_FUNCTION = re.compile(r"^autograd::engine::evaluate_function")
ACCUMULATE_GRAD = re.compile(r"AccumulateGrad")
PARAMETER_GRAD = re.compile(
    r"^autograd::engine::evaluate_function: torch::autograd::AccumulateGrad")
"""The engine's node per parameter of a backward (one a parameter and backward)."""

Cost = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class CompiledHostCost:
    """Host costs of one compiled step's trace, the profiler's cost taken out (medians, µs)."""

    generated_launch_us: float | None
    extern_op_us: float | None
    """Per extern op other than a convolution."""
    convolution_op_us: float | None
    """Per forward convolution op."""
    convolution_backward_op_us: float | None
    forward_call_us: float | None
    backward_call_us: float | None
    autograd_function_us: float | None
    launch_call_us: float | None
    """The trace's median ``cudaLaunchKernel`` call: the unit of the constants."""
    num_graph_calls: int
    parameters_per_step: float
    """The parameters a step's backward accumulated (``parameters_per_step``)."""
    profiler_overhead_us: float


@dataclass(frozen=True)
class HostCosts:
    """The costs of compiled code on one trace's host, µs (the constants in its units)."""

    generated_launch_us: float
    extern_op_us: float
    convolution_op_us: float
    convolution_backward_op_us: float
    forward_call_us: float
    """A training forward call's, with the trace's parameters (``parameters_per_step``)."""
    inference_call_us: float
    backward_call_us: float


def host_costs(trace: Trace, fallback_launch_call_us: float) -> HostCosts:
    """The constants in units of ``trace``'s median launch call (``fallback_launch_call_us``
    where it has none)."""
    unit = launch_call_us(trace) or fallback_launch_call_us
    forward_calls = (FORWARD_CALL_BASE_CALLS
                     + FORWARD_CALL_PER_PARAMETER_CALLS * parameters_per_step(trace))
    return HostCosts(GENERATED_LAUNCH_CALLS * unit, EXTERN_OP_CALLS * unit,
                     CONVOLUTION_OP_CALLS * unit, CONVOLUTION_BACKWARD_OP_CALLS * unit,
                     forward_calls * unit, INFERENCE_CALL_CALLS * unit,
                     BACKWARD_CALL_CALLS * unit)


def parameters_per_step(trace: Trace) -> float:
    """Parameters a step's backward accumulates (``PARAMETER_GRAD`` nodes per step; one step
    where the trace marks none): the compiled forward graph's parameter inputs."""
    nodes = np.count_nonzero(trace.strings.mask(trace.cpu_ops.name_id, PARAMETER_GRAD))
    return float(nodes) / max(len(trace.steps), 1)


WEIGHT_OP = re.compile(r"^aten::(linear|convolution)$")
"""The ops that apply a weight parameter, its shape their second input's (``Input Dims``)."""
PARAMETER_NODE = re.compile(r"^torch::autograd::AccumulateGrad$")
"""The node that accumulates one parameter's gradient, its shape its input's."""


def calls_per_step(trace: Trace) -> int:
    """How many times a step calls its model, the compiled graph's calls: per weight shape,
    the forward's ``linear``/``convolution`` ops with that weight (the backward's recomputed
    ones left out, and an op inside another of them, autocast's: ``outermost``) over the
    parameters of that shape whose gradient the backward accumulates, the median over shapes,
    rounded (at least 1). A model called once uses each weight once (layers of one shape are
    as many parameters as uses; a tied embedding's ``linear`` is its one use); a policy called
    per environment step (``rl_policy``: each ``[64, 16]`` weight 32 times a step) pays
    Dynamo's guards and the runtime wrappers per call: the compiled steps of
    ``tests/data/diagnose/compiled`` recorded 32 ``Torch-Compiled Region`` and 32
    ``CompiledFunctionBackward`` a step for it. 1 without shapes or without a backward. A loop
    inside the compiled ``forward`` reads the same and is one call: the trace does not tell
    them apart, and the finding's fix says which is assumed."""
    ops = trace.cpu_ops
    weight = forward_weight_ops(trace)
    nodes = np.flatnonzero(trace.strings.mask(ops.name_id, PARAMETER_NODE))
    uses, params = (_shape_counts(trace, rows, at) for rows, at in ((weight, 1), (nodes, 0)))
    ratios = [n / params[shape] for shape, n in uses.items() if params.get(shape)]
    return max(1, round(float(np.median(ratios)))) if ratios else 1


def forward_weight_ops(trace: Trace) -> np.ndarray:
    """The forward's outermost ``WEIGHT_OP`` ops (not the backward's recomputed ones), in
    time order."""
    ops = trace.cpu_ops
    weight = np.flatnonzero(trace.strings.mask(ops.name_id, WEIGHT_OP))
    return outermost(trace, weight[~iv.contains(backward_spans(trace), ops.ts_us[weight])])


def call_spans(trace: Trace, calls: int) -> iv.Intervals:
    """Where a step calls its model ``calls`` times: per step, its forward weight ops in time
    order split into ``calls`` consecutive groups of equal size (each call uses each weight
    once, in one order), each call from its first weight op's start to its last one's end.
    A module's ops before its first weight op or after its last (a ``cat`` of the inputs, the
    gating after the last ``linear``) fall outside: the trace does not show where the module's
    ``forward`` begins and ends."""
    ops, steps = trace.cpu_ops, trace.steps
    weight = forward_weight_ops(trace)
    weight = weight[np.argsort(ops.ts_us[weight], kind="stable")]
    lo: list[float] = []
    hi: list[float] = []
    for start, end in zip(steps.start_us, steps.end_us, strict=True):
        mine = weight[(ops.ts_us[weight] >= start) & (ops.ts_us[weight] <= end)]
        for group in np.array_split(mine, min(calls, len(mine))) if len(mine) else ():
            lo.append(float(ops.ts_us[group[0]]))
            hi.append(float(ops.end_us[group].max()))
    return iv.union(np.asarray(lo), np.asarray(hi))


def outermost(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The CPU ops of ``rows`` that run inside none of the others on their thread: autocast's
    ``aten::linear`` casts its inputs and calls ``aten::linear`` again (one use, two ops)."""
    ops = trace.cpu_ops
    rows = rows[np.lexsort((-ops.dur_us[rows], ops.ts_us[rows], ops.tid[rows]))]
    keep = np.ones(len(rows), dtype=bool)
    for tid in np.unique(ops.tid[rows]).tolist():
        mine = np.flatnonzero(ops.tid[rows] == tid)
        ends = np.maximum.accumulate(ops.end_us[rows[mine]])
        keep[mine[1:]] = ops.ts_us[rows[mine[1:]]] >= ends[:-1]
    return np.sort(rows[keep])


def _shape_counts(trace: Trace, rows: np.ndarray, index: int) -> dict[str, int]:
    """Ops of ``rows`` by the shape of their input ``index`` (its dims as text)."""
    ids, counts = np.unique(trace.cpu_ops.input_dims_id[rows], return_counts=True)
    out: dict[str, int] = {}
    for text_id, count in zip(ids.tolist(), counts.tolist(), strict=True):
        dims = trace.json_value(text_id) or []
        if len(dims) > index and dims[index]:
            key = str(dims[index])
            out[key] = out.get(key, 0) + count
    return out


def launch_call_us(trace: Trace) -> float | None:
    """Median duration of the runtime calls that launched a kernel (``LAUNCH_CALL``)."""
    rows = np.unique(trace.kernels.launch_row[trace.kernels.launch_row >= 0])
    rows = rows[trace.strings.mask(trace.runtime.name_id[rows], LAUNCH_CALL)]
    return float(np.median(trace.runtime.dur_us[rows])) if len(rows) else None


def measure(trace: Trace) -> CompiledHostCost:
    """The per-launch and per-call host costs of a trace of compiled steps (module docstring)."""
    overhead = estimated_overhead_us(trace) or 0.0
    ann, ops, rt, kernels = trace.annotations, trace.cpu_ops, trace.runtime, trace.kernels
    events = np.sort(np.concatenate([ops.ts_us, rt.ts_us, ann.ts_us]))

    def cost(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:  # the profiler's events out
        return np.asarray((hi - lo) - overhead * (np.searchsorted(events, hi)
                                                  - np.searchsorted(events, lo)))

    launched = kernels.launch_row >= 0
    launch = kernels.launch_row[launched]
    generated = trace.strings.mask(kernels.name_id[launched], TRITON_KERNEL)
    order = np.argsort(rt.ts_us[launch], kind="stable")
    launch, generated = launch[order], generated[order]
    ends = rt.ts_us[launch] + rt.dur_us[launch]
    calls = np.flatnonzero(trace.strings.mask(ann.name_id, GRAPH_CALL))
    per_launch: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    op_rows: list[np.ndarray] = []
    inside_us = np.zeros(len(calls))
    for i, a in enumerate(calls):
        lo, hi = ann.ts_us[a], ann.ts_us[a] + ann.dur_us[a]
        mine = np.flatnonzero((rt.ts_us[launch] >= lo) & (ends <= hi))
        last = _last_of_each_op(rt.op_row[launch[mine]])
        # from one op's last launch to the next one's: the first op's interval also holds the
        # generated call's prologue, which is the call's cost
        per_launch.append(cost(ends[mine][last][:-1], ends[mine][last][1:]))
        kinds.append(generated[mine][last][1:])
        op_rows.append(rt.op_row[launch[mine][last][1:]])
        inside_us[i] = float(per_launch[-1].sum())
    launch_us = np.concatenate(per_launch) if per_launch else np.zeros(0)  # per op
    kind = np.concatenate(kinds) if kinds else np.zeros(0, dtype=bool)
    op = np.concatenate(op_rows) if op_rows else np.zeros(0, dtype=np.int64)
    conv = np.append(trace.strings.mask(ops.name_id, CONVOLUTION_OP), False)[op]
    backward = np.append(trace.strings.mask(ops.name_id, CONVOLUTION_BACKWARD_OP), False)[op]
    return CompiledHostCost(
        generated_launch_us=_median(launch_us[kind]),
        extern_op_us=_median(launch_us[~kind & ~conv]),
        convolution_op_us=_median(launch_us[~kind & conv & ~backward]),
        convolution_backward_op_us=_median(launch_us[~kind & backward]),
        forward_call_us=_call_us(trace, FORWARD_REGION, calls, inside_us, cost),
        backward_call_us=_call_us(trace, BACKWARD_REGION, calls, inside_us, cost),
        autograd_function_us=_call_us(trace, AUTOGRAD_FUNCTION_REGION, calls,
                                      cost(ann.ts_us[calls], ann.ts_us[calls] + ann.dur_us[calls]),
                                      cost),
        launch_call_us=launch_call_us(trace),
        num_graph_calls=len(calls),
        parameters_per_step=parameters_per_step(trace),
        profiler_overhead_us=overhead,
    )


def _call_us(trace: Trace, region: re.Pattern[str], calls: np.ndarray, inside_us: np.ndarray,
             cost: Cost) -> float | None:
    """Median over the regions named ``region`` of their cost beyond ``inside_us`` of the graph
    calls in them (their ops' intervals, or the whole calls)."""
    ops, ann = trace.cpu_ops, trace.annotations
    rows = np.flatnonzero(trace.strings.mask(ops.name_id, region))
    if not len(rows):
        return None
    lo, hi = ops.ts_us[rows], ops.ts_us[rows] + ops.dur_us[rows]
    total = cost(lo, hi)
    at = ann.ts_us[calls]
    launches = np.array([inside_us[(at >= a) & (at <= b)].sum() for a, b in zip(lo, hi,
                                                                                 strict=True)])
    return _median(total - launches)


def _last_of_each_op(op_rows: np.ndarray) -> np.ndarray:
    """Of launches in order, the last of each run launched by one CPU op (an extern op that
    launches several kernels is one dispatch; a launch with no op is its own)."""
    same = (op_rows[1:] == op_rows[:-1]) & (op_rows[1:] >= 0)
    return np.flatnonzero(np.append(~same, True))


def _median(values: np.ndarray) -> float | None:
    return float(np.median(values)) if len(values) else None


def backward_spans(trace: Trace) -> iv.Intervals:
    """CPU spans of the autograd engine's backward functions (the backward of the step)."""
    ops = trace.cpu_ops
    pick = trace.strings.mask(ops.name_id, AUTOGRAD_FUNCTION)
    return iv.union(ops.ts_us[pick], ops.ts_us[pick] + ops.dur_us[pick])


def accumulate_grad_spans(trace: Trace) -> iv.Intervals:
    """CPU spans of ``AccumulateGrad``: the engine runs it per parameter after a compiled
    backward too (it stays eager)."""
    ops = trace.cpu_ops
    pick = trace.strings.mask(ops.name_id, ACCUMULATE_GRAD)
    return iv.union(ops.ts_us[pick], ops.ts_us[pick] + ops.dur_us[pick])

