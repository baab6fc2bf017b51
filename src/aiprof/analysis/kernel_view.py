"""Kernel view: every GPU kernel name with its time and whether it runs on tensor cores.

A kernel runs on tensor cores when its name says so (``tensor_core_kernel``): a GEMM,
convolution or attention kernel (``kernel_kinds.GEMM_OR_CONV`` or ``flash``/``fmha``) whose
name carries a tensor-core marker (``kernel_kinds.TENSOR_CORE``: ``tf32``, ``bf16``,
``f16``, ``hmma``, ``wgmma``, ``tensorop``, ``s16816`` ...) and no FP32 CUDA-core one
(``sgemm``, ``simt``, ``f32f32_f32f32``), or whose name holds a tensor-core instruction
(``hmma``, ``imma``, ``wgmma``, ``gmma``, ``tensorop``, the MMA shapes ``s16816``/``h16816``/
``s1688``/``h1688``/``h884`` (Volta's ``volta_h884gemm``)): the cuBLAS, cuDNN and CUTLASS
naming of Kineto traces (kineto-trace-format.md §3). FlashAttention and fused attention
(``flash``, ``fmha``) kernels compute their matmuls with ``mma`` instructions and run in
FP16/BF16 only (Dao et al., 2022, §3.1; Dao, 2023).
TensorBoard's plugin matched a fixed list of such names; names are a hint, not a counter
reading: ``aiprof kernels --ncu`` measures tensor-pipe use where it matters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from aiprof.analysis.frames import data_frame
from aiprof.analysis.groups import groups
from aiprof.analysis.kernel_kinds import FP32_CUDA_CORE, GEMM_OR_CONV, TENSOR_CORE
from aiprof.trace import Trace

ATTENTION = re.compile(r"flash|fmha", re.I)
TENSOR_CORE_INSTRUCTION = re.compile(
    r"hmma|imma|wgmma|gmma|tensorop|[sh]16816|[sh]1688|[sh]884|i8816", re.I
)


def tensor_core_kernel(name: str) -> bool:
    """Whether a kernel name says it runs on tensor cores (see the module docstring)."""
    if TENSOR_CORE_INSTRUCTION.search(name) or ATTENTION.search(name):
        return True
    math = GEMM_OR_CONV.search(name) or ATTENTION.search(name)
    return bool(math and TENSOR_CORE.search(name) and not FP32_CUDA_CORE.search(name))


@dataclass(frozen=True)
class KernelRow:
    name: str
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    pct: float
    """Share of all kernel time in the trace."""
    tensor_core: bool


@dataclass(frozen=True)
class KernelView:
    """Kernels by total time, largest first; tensor-core shares of kernel and math time."""

    rank: int
    path: str
    kernel_us: float
    tensor_core_us: float
    math_us: float
    """GEMM, convolution and attention kernels."""
    rows: list[KernelRow]

    @property
    def tensor_core_pct(self) -> float:
        return 100.0 * self.tensor_core_us / self.kernel_us if self.kernel_us > 0 else 0.0

    @property
    def tensor_core_pct_of_math(self) -> float:
        return 100.0 * self.tensor_core_us / self.math_us if self.math_us > 0 else 0.0

    def to_pandas(self) -> Any:
        names = [f.name for f in fields(KernelRow)]
        return data_frame({n: [getattr(r, n) for r in self.rows] for n in names})


def kernel_view(trace: Trace) -> KernelView:
    """Every kernel name of the trace, grouped (the whole trace, as the op view)."""
    kernels = trace.kernels
    ids, dur = kernels.name_id, kernels.dur_us
    if len(ids) == 0:
        return KernelView(trace.rank, trace.path, 0.0, 0.0, 0.0, [])
    distinct, group = groups(ids)
    count = np.bincount(group)
    total = np.bincount(group, weights=dur)
    low = np.full(len(distinct), np.inf)
    high = np.full(len(distinct), -np.inf)
    np.minimum.at(low, group, dur)
    np.maximum.at(high, group, dur)
    names = [trace.name(int(i)) for i in distinct]
    tc = np.array([tensor_core_kernel(n) for n in names], dtype=bool)
    math = np.array([bool(GEMM_OR_CONV.search(n) or ATTENTION.search(n)) for n in names])
    grand = float(total.sum())
    rows = [
        KernelRow(names[g], int(count[g]), float(total[g]), float(total[g] / count[g]),
                  float(low[g]), float(high[g]),
                  100.0 * float(total[g]) / grand if grand > 0 else 0.0, bool(tc[g]))
        for g in np.lexsort((distinct, -total))
    ]
    return KernelView(trace.rank, trace.path, grand, float(total[tc].sum()),
                      float(total[math | tc].sum()), rows)
