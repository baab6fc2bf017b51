"""Which GPU work is compute, communication or memory traffic, and which CPU spans are what.

Communication kernels are NCCL/RCCL kernels by name (``ncclKernel_*``, ``ncclDevKernel_*``,
``rccl*``), matched case-insensitively: HTA 0.5's ``^nccl`` misses none of these, but its
straggler analysis misses ``ncclDevKernel_*`` and 0.6's ``^hip`` calls any HIP kernel
communication (kineto-trace-format.md §12.2, §12.5); aiprof does neither.
"""

from __future__ import annotations

import re

import numpy as np

from aiprof.analysis.intervals import Intervals, union
from aiprof.trace import Trace
from aiprof.trace.tables import SpanTable

COMMUNICATION_KERNEL = re.compile(
    r"nccl|rccl|^c10d::|all_?reduce|all_?gather|reduce_?scatter", re.I
)
DATALOADER = re.compile(r"^enumerate\(DataLoader\)#.*__next__|^enumerate\(DataPipe\)#")
CPU_COMMUNICATION = re.compile(
    r"^(nccl|gloo):(broadcast|reduce|all_reduce|all_gather|reduce_scatter|all_to_all|send|recv)"
)


def communication_kernels(trace: Trace) -> np.ndarray:
    """Mask over ``trace.kernels``: True for collective-communication kernels."""
    return trace.strings.mask(trace.kernels.name_id, COMMUNICATION_KERNEL)


def spans(table: SpanTable, mask: np.ndarray | None = None) -> Intervals:
    """The union of a table's spans (optionally only the masked rows)."""
    if mask is None:
        return union(table.ts_us, table.end_us)
    return union(table.ts_us[mask], table.end_us[mask])
