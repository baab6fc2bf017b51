"""GIVEN real traces and every change their findings make WHEN the tuned replay runs THEN its
result is the one of the loop before tuning, bit for bit (every float by its hex)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import EXAMPLES
from tests.diagnose import replay_reference

from aiprof import load_trace
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.engine import diagnose_trace
from aiprof.diagnose.replay import Change, Replayed, simulate
from aiprof.diagnose.verdict import all_fixes

TRACES = [
    EXAMPLES / "h200_resnet50_bf16.json.gz",
    EXAMPLES / "h200_gpt2_bf16.json.gz",
    EXAMPLES / "critical_path" / "event_sync_trace.json.gz",
    EXAMPLES / "nccl_parser_config" / "nccl_data.json.gz",
    EXAMPLES / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]


def _bits(result: Replayed) -> tuple[object, ...]:
    def hexed(value: float) -> str:
        return float(value).hex()

    return (hexed(result.step_us), tuple(map(hexed, result.host_wait_us)), result.num_ops,
            result.num_drained, hexed(result.sync_wait_us), tuple(map(hexed, result.busy_us)))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: Path(p).name.split(".")[0])
def test_tuned_replay_is_the_reference_bit_for_bit(path: Path) -> None:
    trace = load_trace(path)
    found, ctx = diagnose_trace(trace, DiagnoseOptions())
    assert isinstance(ctx, Context)
    changes: list[Change | None] = [None, Change()]
    changes += [f.change for f in found if f.change is not None]
    if len(changes) > 3:
        changes.append(all_fixes([c for c in changes[2:] if c is not None]))
    for change in changes:
        assert _bits(simulate(ctx.timeline, change)) == _bits(
            replay_reference.simulate(ctx.timeline, change)), change
    assert len(changes) >= 2
