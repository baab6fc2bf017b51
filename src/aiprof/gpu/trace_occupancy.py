"""Theoretical occupancy of every kernel of a Kineto trace (issue 3, item 8).

Launch arguments come from ``trace.kernels`` (grid, block, registers per thread, shared memory);
the device from the trace's ``deviceProperties``. Also reproduces Kineto's own
"est. achieved occupancy %" (pytorch/kineto ``libkineto/src/DeviceProperties.cpp``; formula in
../shared/reference/gpu-models.md §1.10) so the trace's number can be explained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from aiprof.errors import AiprofError
from aiprof.gpu.kernel_occupancy import KernelOccupancy, kernel_occupancy
from aiprof.hardware import GpuSpec, spec_from_device_properties

if TYPE_CHECKING:
    from aiprof.trace import Trace


def trace_spec(trace: Trace) -> GpuSpec:
    """The spec of the GPU the trace's kernels ran on (unsupported when the trace has none)."""
    device = trace.device
    if device is None:
        return GpuSpec(name="unknown device", vendor="unknown")
    try:
        return spec_from_device_properties(device.raw)
    except AiprofError:  # an architecture newer than the table: no occupancy, not a crash
        return GpuSpec(name=device.name, vendor=device.vendor, num_sms=device.num_sms)


def trace_kernel_occupancy(trace: Trace) -> KernelOccupancy:
    """Per-kernel theoretical occupancy, limiter and small-grid flag, rows of ``trace.kernels``."""
    k = trace.kernels
    return kernel_occupancy(k.blocks, k.threads_per_block, k.registers_per_thread,
                            k.shared_mem_bytes, trace_spec(trace))


def kineto_estimate_pct(result: KernelOccupancy, threads_per_block: NDArray[np.int64],
                        max_threads_per_sm: int) -> NDArray[np.float64]:
    """Kineto's "est. achieved occupancy %" from our per-kernel result.

    ``round(100 * min(B_occ, blocks / numSms) * blockSize / maxThreadsPerSM)``; Kineto divides
    blocks by SMs in single precision and rounds half up. Kineto's ``B_occ`` uses the header's
    DEFAULT shared-memory config, so kernels above 48 KB read 0 in traces; here they get the
    real (opt-in) value.
    """
    if result.num_sms is None:
        return np.full(len(threads_per_block), np.nan)
    per_sm = (result.num_blocks.astype(np.float32) / np.float32(result.num_sms)).astype(np.float64)
    blocks = np.minimum(result.active_blocks_per_sm, per_sm)
    pct = np.floor(blocks * threads_per_block / max_threads_per_sm * 100 + 0.5)
    return np.where(result.active_blocks_per_sm >= 0, pct, np.nan)
