"""GIVEN kernels named as NCCL and RCCL name them WHEN compute is separated from communication
THEN the distributed analysis and the breakdown agree: one classifier
(``analysis.classify.communication_kernels``) decides for both."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tests.support.kineto_synth import TraceBuilder

from aiprof.analysis.classify import communication_kernels
from aiprof.distributed.commtrace import compute_spans
from aiprof.trace import load_trace

NAMES = ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "rcclKernel_AllGather_RING_SIMPLE",
         "ncclKernel_ReduceScatter_RING_LL_Sum_float", "ampere_sgemm_128x64_nn", "elementwise"]


def test_rccl_and_nccl_kernels_are_not_compute(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.step(1, 0.0, 1000.0)
    for i, name in enumerate(NAMES):
        builder.kernel(name, launch_ts=10.0 + 100 * i, start=20.0 + 100 * i, dur=50.0)
    trace = load_trace(builder.write(tmp_path / "t.json.gz"))
    comm = communication_kernels(trace)
    names = [trace.strings[int(i)] for i in trace.kernels.name_id]
    assert [n for n, c in zip(names, comm, strict=True) if c] == NAMES[:3]
    starts, _ = compute_spans(trace)
    assert np.array_equal(np.sort(starts), np.sort(trace.kernels.ts_us[~comm]))
    assert len(starts) == 2
