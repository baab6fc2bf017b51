"""Section 33.1 models: occupancy, coalescing, bank conflicts, divergence, roofline, counters."""

from aiprof.gpu.kernel_occupancy import KernelOccupancy, kernel_occupancy
from aiprof.gpu.occupancy import Occupancy, occupancy
from aiprof.gpu.occupancy_sweep import BestBlockSize, OccupancySweep, best_block_size, sweep
from aiprof.gpu.trace_occupancy import kineto_estimate_pct, trace_kernel_occupancy

__all__ = ["BestBlockSize", "KernelOccupancy", "Occupancy", "OccupancySweep", "kernel_occupancy",
           "best_block_size", "kineto_estimate_pct", "occupancy", "sweep", "trace_kernel_occupancy"]
