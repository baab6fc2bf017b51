"""What the diagnosis of a trace does not cover, said before any finding: other backends'
device events, a single cold iteration, GPU ops without launch calls, a replay off the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.diagnose.context import Context
from aiprof.diagnose.replay import WAITING_CALL_FACTOR
from aiprof.errors import InputError, UnsupportedDeviceError
from aiprof.trace import Trace, TraceSet
from aiprof.trace.steps import SOURCE_PROFILER_STEP, SOURCE_WHOLE_TRACE

OTHER_DEVICE_CATEGORIES = {"mtia_ccp_events": "MTIA"}
"""Device-side event categories of other backends (../shared/reference/kineto-trace-format.md
§4: MTIA writes ``mtia_runtime`` calls and ``mtia_ccp_events`` device events). aiprof reads
CUDA and ROCm GPU ops (``kernel``, ``gpu_memcpy``, ``gpu_memset``) only."""
FIDELITY_TOLERANCE_PCT = 5.0
"""Replay of the unchanged step off the measured step by more than this: the output says so
(issue 15, item 6)."""


def other_device_events(trace: Trace) -> dict[str, int]:
    """Count of the device events of other backends, by backend."""
    other = trace.other_spans
    found: dict[str, int] = {}
    for category, backend in OTHER_DEVICE_CATEGORIES.items():
        count = int(np.count_nonzero(other.category_id == trace.strings.id(category)))
        if count:
            found[backend] = found.get(backend, 0) + count
    return found


@dataclass(frozen=True)
class DeviceFacts:
    """What ``check_supported`` needs of one rank."""

    has_gpu: bool
    other_events: dict[str, int]
    """``other_device_events`` (only looked at without GPU ops)."""
    num_runtime_calls: int


def device_facts(trace: Trace) -> DeviceFacts:
    return DeviceFacts(trace.has_gpu, {} if trace.has_gpu else other_device_events(trace),
                       len(trace.runtime))


def check_supported(traces: TraceSet) -> None:
    """Refuse a trace set without GPU ops whose device events are of a backend aiprof does not
    read, or whose GPU runtime calls show that the device activity was not recorded."""
    if any(t.has_gpu for t in traces):
        return
    check_facts([device_facts(t) for t in traces])


def check_facts(ranks: list[DeviceFacts]) -> None:
    """``check_supported`` of the ranks' ``DeviceFacts``."""
    if any(r.has_gpu for r in ranks):
        return
    other: dict[str, int] = {}
    for rank in ranks:
        for backend, count in rank.other_events.items():
            other[backend] = other.get(backend, 0) + count
    if other:
        what = ", ".join(f"{n} {b} device events" for b, n in sorted(other.items()))
        raise UnsupportedDeviceError(
            f"the trace's device activity is {what}: aiprof diagnoses CUDA and ROCm GPU ops "
            "only, so nothing on the device was analysed (the host side: aiprof summary)")
    calls = sum(r.num_runtime_calls for r in ranks)
    if calls:
        raise InputError(
            f"the trace has {calls} GPU runtime calls but no GPU events (kernels, copies): "
            "it was recorded without the device activity; record with torch.profiler.profile("
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])")


def is_cold(trace: Trace) -> bool:
    """A trace of a first iteration: one step that is ``ProfilerStep#0``, or no step markers and
    a kernel whose first launch waited (``first_launches_waited``)."""
    steps = trace.steps
    if len(steps) == 1 and trace.step_source == SOURCE_PROFILER_STEP:
        return int(steps.number[0]) == 0
    return trace.step_source == SOURCE_WHOLE_TRACE and first_launches_waited(trace) > 0


def first_launches_waited(trace: Trace) -> int:
    """Kernels whose first launch call lasted more than ``WAITING_CALL_FACTOR`` median launch
    calls: the module was loaded on first use (CUDA Programming Guide, "Lazy Loading"; the
    default since CUDA 12.2), which happens in the first iteration only."""
    kernels, rt = trace.kernels, trace.runtime
    launched = np.flatnonzero(kernels.launch_row >= 0)
    if len(launched) < 2:
        return 0
    calls = rt.dur_us[kernels.launch_row[launched]]
    order = np.argsort(kernels.ts_us[launched], kind="stable")
    _, first = np.unique(kernels.name_id[launched][order], return_index=True)
    return int(np.count_nonzero(calls[order][first] > WAITING_CALL_FACTOR * np.median(calls)))


def rank_prefix(trace: Trace) -> str:
    """``rank N: `` before a note of one rank of a distributed run, else nothing."""
    return f"rank {trace.rank}: " if trace.rank >= 0 and trace.distributed else ""


def scope_notes(ctx: Context) -> list[str]:
    """Notes on what this rank's diagnosis does not cover."""
    trace, notes = ctx.trace, []
    rank = rank_prefix(trace)
    if is_cold(trace):
        notes.append(
            f"{rank}the trace holds a first iteration only: not a steady state (first "
            "launches, cudaMalloc, autotuning and lazy loading happen there), so "
            "allocator_churn is not reported; record steps after warm-up, e.g. "
            "torch.profiler.schedule(wait=1, warmup=1, active=3)")
    elif trace.step_source == SOURCE_WHOLE_TRACE:
        notes.append(f"{rank}no step markers: the whole trace is read as one step, warm-up "
                     "included (mark steps with torch.profiler's prof.step() or aiprof.step())")
    other = other_device_events(trace)
    if other and trace.has_gpu:
        notes.append(rank + ", ".join(f"{n} {b} device events" for b, n in other.items())
                     + " not analysed (CUDA/ROCm GPU ops only)")
    if trace.has_gpu:
        notes.extend(rank + n for n in _replay_notes(ctx))
    return notes


def _replay_notes(ctx: Context) -> list[str]:
    notes = []
    timeline = ctx.timeline
    launched = int(np.count_nonzero(ctx.trace.gpu_ops.launch_row >= 0))
    if len(ctx.trace.gpu_ops) and launched == 0:
        notes.append("no GPU op has a launch call in the trace (no CUDA runtime events): the "
                     "replay queues them back to back and host-side causes are not diagnosed")
    measured = timeline.measured_us
    if measured > 0 and ctx.as_recorded_us > 0:
        off = 100.0 * (ctx.as_recorded_us / measured - 1.0)
        if abs(off) > FIDELITY_TOLERANCE_PCT:
            steps = max(len(ctx.trace.steps), 1)
            notes.append(
                f"the replay of the unchanged step is {off:+.1f}% off the measured step "
                f"({ctx.as_recorded_us / steps / 1000:.2f} ms against "
                f"{measured / steps / 1000:.2f} ms): the gains are shares of the replayed step "
                "and are less certain here")
    return notes
