"""Where in time a finding applies, for annotating it on a timeline.

- ``cpu_bound``, ``host_sync``, ``dataloader``, ``h2d_transfer``: the GPU idle with nothing
  queued on any stream (it waited for the host: ``queue.waiting``);
- ``tensor_cores_unused``: the FP32 CUDA-core GEMM/conv kernels (``tensor_cores``);
- ``communication_exposed``, ``straggler``: communication kernels not under compute;
- every other category: the profiled steps.
"""

from __future__ import annotations

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.classify import communication_kernels, spans
from aiprof.analysis.queue import queue_length, waiting
from aiprof.analysis.tensor_cores import tensor_core_usage
from aiprof.trace import Trace

HOST_WAIT = frozenset({"cpu_bound", "host_sync", "dataloader", "h2d_transfer"})


def finding_ranges(trace: Trace, category: str) -> iv.Intervals:
    """The time ranges of ``trace`` a finding of ``category`` is about (normalized)."""
    window = step_window(trace)
    if category in HOST_WAIT:
        busy = iv.union_all(spans(trace.kernels), spans(trace.memcpy), spans(trace.memset))
        idle = iv.subtract(window, busy)
        return iv.subtract(idle, waiting(queue_length(trace)))
    if category == "tensor_cores_unused":
        rows = tensor_core_usage(trace).fp32_rows
        ops = trace.gpu_ops
        return iv.union(ops.ts_us[rows], ops.end_us[rows])
    if category in ("communication_exposed", "straggler"):
        comm = communication_kernels(trace)
        exposed = iv.subtract(spans(trace.kernels, comm), spans(trace.kernels, ~comm))
        return iv.intersect(exposed, window)
    return window
