"""GIVEN real traces recorded with shapes WHEN the launching ops are grouped by call signature
THEN every op's call is the one decoded from its own row, and the roofline is the per-op sum."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import EXAMPLES

from aiprof import load_trace
from aiprof.tensor.trace_ops import call_from_row, launching_calls, launching_ops
from aiprof.tensor.trace_roofline import COMMUNICATION_PREFIXES, trace_roofline

TRACES = [
    EXAMPLES / "h200_resnet50_bf16.json.gz",
    EXAMPLES / "h200_gpt2_bf16.json.gz",
    EXAMPLES / "nccl_parser_config" / "nccl_data.json.gz",
    EXAMPLES / "negative_queue_length_values_check" / "rank0.json.gz",
]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: Path(p).name.split(".")[0])
def test_each_op_gets_the_call_of_its_own_row(path: Path) -> None:
    trace = load_trace(path)
    found = launching_calls(trace)
    assert len(found.rows) > 100 and 1 < len(found.calls) < len(found.rows)
    for row, index in zip(found.rows.tolist(), found.call_index.tolist(), strict=True):
        assert found.calls[index] == call_from_row(trace, row)
    assert np.all(np.diff(trace.cpu_ops.ts_us[found.rows]) >= 0)  # in trace order
    ops = launching_ops(trace)
    assert [op.row for op in ops] == found.rows.tolist()
    assert sum(op.num_kernels for op in ops) == int(found.num_kernels.sum())


@pytest.mark.parametrize("path", TRACES[:2], ids=lambda p: Path(p).name.split(".")[0])
def test_roofline_rows_add_up_to_the_ops(path: Path) -> None:
    trace = load_trace(path)
    result = trace_roofline(trace)
    ops = [op for op in launching_ops(trace) if not op.call.name.startswith(COMMUNICATION_PREFIXES)]
    assert result.num_ops == len(ops) == sum(r.num_calls for r in result.rows)
    assert result.device_us == pytest.approx(sum(op.device_us for op in ops), rel=1e-12)
