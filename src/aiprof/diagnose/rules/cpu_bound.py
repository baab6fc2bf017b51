"""``cpu_bound``: the GPU waits for kernels the CPU launches slower than they run."""

from __future__ import annotations

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.sdpa_calls import unmasked_calls
from aiprof.diagnose.context import Context
from aiprof.diagnose.explain import bounded_gain
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.host_speed import HOST_TIME_FACTORS, on_host
from aiprof.diagnose.replay import Change, combine
from aiprof.diagnose.rule import Rule, ms
from aiprof.diagnose.rules.host_sync import sync_op_spans

GRAPH_TURNAROUND_US = {"sm_90": 0.31}
"""Per architecture: a kernel's start after the previous kernel's end inside a replayed CUDA
graph (elsewhere the trace's own turnaround is kept: not measured there). Measured on one
H200 on 2026-12-01 apart from any workload (``scripts/h200/graph_turnaround.py``,
``tests/data/diagnose/h200_graph_turnaround.json``): 2,000 in-place adds replayed from a graph
take 0.31 µs each beyond the kernel's own time on 1M elements (0.27 on 4,096, 0.15 on one),
against 2.8-4.8 µs between the same kernels queued on a stream. The suite's five graphed
launch-bound steps agree: (graphed step − kernel time) / kernels per step 0.28-0.70 µs,
median 0.33 (``tests/diagnose/test_host_side_models.py``)."""


UNMASKED_CAVEAT = (
    " Check the graphed step's kernels first: {calls} scaled_dot_product_attention calls a "
    "step get no mask and are not causal, and a library that decides from the data whether a "
    "mask is needed only when not tracing builds one under capture (transformers counts a "
    "capturing stream as tracing), which can send SDPA to a slower path: on the H200 suite's "
    "BERT and DistilBERT encoders the graph ran SDPA's math path, 0.8 and 7 ms more GPU work a "
    "step, which this estimate does not include."
)
"""Appended to the fix where the step has SDPA calls a capture can give a mask."""


def graph_turnaround_us(ctx: Context) -> float | None:
    """``GRAPH_TURNAROUND_US`` of the trace's GPU (None where it is not measured)."""
    arch = ctx.spec.arch
    return GRAPH_TURNAROUND_US.get(arch.name) if arch is not None else None


def host_cpu(ctx: Context) -> iv.Intervals:
    """CPU time that stays on the host whatever launches it: the DataLoader, the allocator, the
    ops that synchronize and host work other than launching (neither a CUDA graph nor
    ``torch.compile`` removes it)."""
    return iv.union_all(ctx.dataloader.spans, ctx.allocator.call_spans, sync_op_spans(ctx),
                        ctx.host_work.spans)


def change(ctx: Context) -> Change | None:
    """CPU work between launches set to zero (CUDA graphs), the time a graph cannot take kept,
    and the turnaround between queued kernels that of a graph's where it is measured
    (``GRAPH_TURNAROUND_US``)."""
    host_wait = sum(s.host_wait_us for s in ctx.idle.streams)
    if host_wait <= 0 or ctx.launch.num_launches == 0:
        return None
    return Change(launch_work_scale=0.0, protected_cpu=host_cpu(ctx),
                  queued_gap_us=graph_turnaround_us(ctx))


def turnaround_pct(ctx: Context, graphs: Change) -> float:
    """The share of the replayed step a graph's shorter turnaround can take out (at most)."""
    if graphs.queued_gap_us is None:
        return 0.0
    tl = ctx.timeline
    ops = (tl.gpu_row >= 0) & (tl.gpu_dur_us > 0)
    gaps = np.broadcast_to(tl.gap_us, len(tl.kind))[ops]
    cut = float(np.sum(np.maximum(gaps - graphs.queued_gap_us, 0.0)))
    return 100.0 * cut / max(ctx.base_replayed.step_us, 1e-9)


def capture_blockers(ctx: Context) -> dict[str, Change]:
    """The changes of the causes a CUDA graph cannot capture, by category: those present and
    worth reporting (their own gain at least ``min_gain_pct``)."""
    from aiprof.diagnose.rules import RULES  # the vocabulary discovers this module

    changes = {r.category: r.change(ctx) for r in RULES if r.blocks_capture and r.change}
    return {
        category: fix
        for category, fix in changes.items()
        if fix is not None
        and bounded_gain(ctx, fix, ctx.gain_pct(fix))[0] >= ctx.options.min_gain_pct
    }


def gains_at_host_times(ctx: Context, first: Change | None, graphs: Change,
                        factors: tuple[float, ...]) -> list[float]:
    """The graphs' gain, in % of the step, on hosts whose CPU work and calls take each of
    ``factors`` times the trace's: the step and the step with ``first`` fixed replayed so, the
    graphed step as it is (it launches nothing from the host; what it keeps there stays at
    the trace's speed)."""
    graphed_us = ctx.replay_us(graphs if first is None else combine(first, graphs))
    gains = []
    for factor in factors:
        before = on_host(first, factor)
        base_us = ctx.replay_us(on_host(None, factor))
        saved = 100.0 * (ctx.replay_us(before) - graphed_us) / base_us if base_us > 0 else 0.0
        gains.append(float(min(100.0, max(0.0, saved))))
    return gains


def find(ctx: Context) -> Finding | None:
    graphs = change(ctx)
    if graphs is None:
        return None
    host_wait = sum(s.host_wait_us for s in ctx.idle.streams)
    busiest = ctx.idle.streams[0]
    # launches can only close the gaps where the GPU waited for the host: the bound, as
    # recorded and in the replay without the profiler (where a queue that never drains
    # leaves launching faster nothing to gain)
    recorded = float(100.0 * busiest.host_wait_us / max(ctx.idle.window_us, 1e-9))
    replayed = ctx.base_replayed
    queue_bound = float(100.0 * replayed.busiest_host_wait_us / max(replayed.step_us, 1e-9))
    # and the turnaround between queued kernels, which a graph shortens
    shorter = turnaround_pct(ctx, graphs)
    bound = min(recorded, queue_bound) + shorter
    blockers = capture_blockers(ctx)
    first = combine(*blockers.values()) if blockers else None
    if first is not None:  # a graph cannot capture them: what graphs add once they are gone
        gain = ctx.gain_pct(combine(first, graphs)) - ctx.gain_pct(first)
    else:
        gain = ctx.gain_pct(graphs)
    # where the bound holds the gain back, the replay's graph outruns the trace's waits: the
    # gains at other host speeds are held to it too
    cap = bound if gain > bound else 100.0
    gain = max(0.0, min(gain, bound))
    at_host = [{"host_time_factor": factor, "gain_pct": round(min(at, cap), 1)}
               for factor, at in zip(HOST_TIME_FACTORS,
                                     gains_at_host_times(ctx, first, graphs, HOST_TIME_FACTORS),
                                     strict=True)]
    launch = ctx.launch
    unmasked = unmasked_calls(ctx.trace) / max(len(ctx.trace.steps), 1)
    return Finding(
        category="cpu_bound",
        title=(
            f"The GPU waits for kernel launches {queue_bound:.0f}% of the step without the "
            f"profiler ({recorded:.0f}% as recorded; {round(launch.launches_per_step)} "
            f"launches per step, median kernel {launch.median_kernel_us:.1f} µs)"
        ),
        estimated_gain_pct=gain,
        evidence={
            "gpu_idle_pct": round(busiest.idle_pct, 1),
            "host_wait_pct_as_recorded": round(recorded, 1),
            "host_wait_pct_replayed": round(queue_bound, 1),
            "graph_turnaround_pct": round(shorter, 1),
            "drained_queue_launch_pct": round(
                100.0 * replayed.num_drained / max(replayed.num_ops, 1), 1),
            "host_wait_ms_per_step": ms(host_wait / max(len(ctx.trace.steps), 1)),
            "launches_per_step": round(launch.launches_per_step, 1),
            "median_launch_us": round(launch.median_launch_us, 2),
            "median_kernel_us": round(launch.median_kernel_us, 2),
            "kernels_shorter_than_launch_pct": round(launch.shorter_than_launch_pct, 1),
            "launch_cpu_ms_per_step": ms(launch.launch_us / max(len(ctx.trace.steps), 1)),
            "gpu_ms_per_step": ms(launch.gpu_us / max(len(ctx.trace.steps), 1)),
            # where present: attention a capture can give a mask (``UNMASKED_CAVEAT``)
            **({"sdpa_calls_without_mask_per_step": round(unmasked, 1)} if unmasked else {}),
            "after_fixing_first": sorted(blockers),
            # the same fix on a faster and a slower host (HOST_TIME_FACTORS)
            "gain_at_host_speeds": at_host,
        },
        fix=(
            ("Once " + ", ".join(sorted(blockers)) + " is fixed (a CUDA graph cannot capture "
             "it): " if blockers else "")
            + "Launch less from Python: capture the step with CUDA graphs "
            "(torch.compile(model, mode=\"reduce-overhead\") or torch.cuda.graphs), use a "
            "larger batch so each kernel does more work, and replace loops of small ops by "
            "batched or fused ones (torch._foreach_*, fused optimizers: Adam(fused=True))."
            + (UNMASKED_CAVEAT.format(calls=round(unmasked)) if unmasked else "")
        ),
        model=(
            "replay with the CPU work between launches set to zero (every launch issued as "
            "soon as the previous event), each queued kernel starting as soon after the "
            "previous one as in a graph; "
            "DataLoader and allocator time, host work other than "
            "launching, sync waits and the CPU time of the ops that synchronize kept. When "
            "syncs, steady-state cudaMalloc/cudaFree or pageable copies are present (a CUDA "
            "graph cannot capture "
            "them), the gain is what graphs add to the step with those fixed first"
        ),
        change=graphs,
        needs_first=tuple(sorted(blockers)),
    )


RULE = Rule(
    category="cpu_bound",
    meaning="the GPU idles because kernels are launched slower than they run (Python/launch "
            "overhead, tiny kernels, small batch)",
    find=find,
    change=change,
    host_side=True,
    order=20,
)
