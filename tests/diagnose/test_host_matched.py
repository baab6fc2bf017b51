"""The suite's estimates replayed at the host speed its truths were timed at
(``diagnose/host_matched.py``, ``benchmarks/diagnose_score.py --host-matched``): a diagnostic
of which misses the host's speed explains."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.engine import diagnose_rank
from aiprof.diagnose.host_matched import at_host, host_factor
from aiprof.diagnose.host_speed import on_host
from aiprof.evaluation.labels import base_rounds_ms
from aiprof.trace import load_trace

SUITE = Path(__file__).parents[1] / "data" / "diagnose" / "counterfactual"


def _ctx(workload: str) -> Context:
    return Context(load_trace(SUITE / f"{workload}.aiprof" / "rank0.trace.json.gz"),
                   DiagnoseOptions())


def _step_us(ctx: Context, factor: float) -> float:
    return ctx.replay_us(on_host(None, factor)) / len(ctx.trace.steps)


def test_a_host_bound_steps_factor_is_found_again_from_its_replayed_base() -> None:
    """GIVEN resnet50_pageable's step replayed on a host 1.2 and 0.8 times the trace's, WHEN the
    factor is searched from those bases, THEN it is found again."""
    ctx = _ctx("resnet50_pageable_bf16_infer")
    for factor in (1.2, 0.8):
        found = host_factor(ctx, _step_us(ctx, factor))
        assert found == pytest.approx(factor, abs=0.01)


def test_a_gpu_bound_step_keeps_its_host_or_has_none() -> None:
    """GIVEN hand_attention's GPU-bound step, WHEN the truths' base is 1% off its replay, THEN
    the host is the trace's; WHEN it is 10% faster than its GPU work allows, THEN no host
    factor explains it."""
    ctx = _ctx("hand_attention_bf16_train")
    at_trace = _step_us(ctx, 1.0)
    assert host_factor(ctx, 1.01 * at_trace) == 1.0
    assert host_factor(ctx, 0.9 * at_trace) is None


def test_at_the_traces_host_the_findings_keep_their_claims() -> None:
    ctx = _ctx("resnet50_pageable_bf16_infer")
    kept = diagnose_rank(ctx.trace, DiagnoseOptions()).findings
    moved = {f.category: f.estimated_gain_pct for f in at_host(ctx, kept, 1.0)}
    assert moved == pytest.approx({f.category: f.estimated_gain_pct for f in kept}, abs=0.1)


def test_the_truths_bases_are_every_sessions_blocks() -> None:
    bases = base_rounds_ms(SUITE)
    first = base_rounds_ms(SUITE, "labels-part*.json")
    assert set(first) <= set(bases)
    name = "resnet50_pageable_bf16_infer"  # timed in every session
    assert len(bases[name]) > len(first[name]) >= 3
