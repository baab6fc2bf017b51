"""GIVEN a hand-written GELU chain and a BERT encoder WHEN fusion is analyzed THEN the bytes
saved equal the intermediates' writes and reads counted by hand, and Q/K/V form a group."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from aiprof.measure.tensor.model_analysis import analyze_model  # noqa: E402
from aiprof.tensor.ceilings_model import ceilings_for_gpu  # noqa: E402
from aiprof.tensor.fusion import analyze_fusion  # noqa: E402

from . import nets  # noqa: E402


def _forward_calls(model, inputs):
    with torch.no_grad():
        analysis = analyze_model(model, inputs)
    return [op.call for op in analysis.recorded]


def test_gelu_chain_bytes_saved_counted_by_hand() -> None:
    rows, dim = 64, 256
    report = analyze_fusion(
        _forward_calls(nets.GeluChain(dim), (torch.randn(rows, dim),)), ceilings_for_gpu("H100")
    )
    (group,) = report.groups
    assert group.kind == "vertical" and group.anchor == "addmm"
    # y = fc(x) is written once and read 5 times (3 in y*y*y, y + ..., 0.5*y); the 8
    # intermediates t1..t8 are written once and read once; only the final product is kept.
    tensor_bytes = rows * dim * 4
    assert group.bytes_saved == (1 + 5) * tensor_bytes + 8 * 2 * tensor_bytes
    assert group.launches_saved == 9  # addmm + 9 elementwise ops -> one kernel
    assert report.predicted_saved_us == pytest.approx(group.bytes_saved / 3.35e12 * 1e6)


def test_bert_qkv_projections_are_a_horizontal_group() -> None:
    pytest.importorskip("transformers")
    model = nets.bert("eager").eval()
    ids = torch.randint(0, 1000, (2, 32))
    report = analyze_fusion(_forward_calls(model, (ids,)))
    horizontal = [g for g in report.groups if g.kind == "horizontal"]
    assert len(horizontal) == 2  # one Q/K/V group per layer
    for group in horizontal:
        assert group.ops == ("addmm", "addmm", "addmm")
        assert group.bytes_saved == 2 * (2 * 32 * 128 * 4)  # the shared input read once, not 3x
        assert group.launches_saved == 2


def test_unrelated_ops_are_not_grouped() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16))
    report = analyze_fusion(_forward_calls(model, (torch.randn(4, 16),)))
    assert report.groups == () and report.total_bytes_saved == 0


@pytest.mark.slow
def test_verify_measures_torch_compile() -> None:
    from aiprof.measure.tensor.fusion_verify import verify_fusion

    ticks = iter(range(0, 10**12, 1000))
    result = verify_fusion(
        nets.GeluChain(64), (torch.randn(32, 64),), repeats=3, clock=lambda: next(ticks)
    )
    assert result.eager_us == pytest.approx(1.0) and result.compiled_us == pytest.approx(1.0)
    assert result.speedup == pytest.approx(1.0)


@given(
    ops=st.lists(
        st.sampled_from(["relu", "neg", "add_self", "mul_x", "exp"]), min_size=1, max_size=6
    ),
    rows=st.integers(1, 8),
)
@settings(max_examples=25, deadline=None)
def test_fusion_never_saves_more_than_the_chain_moves(ops, rows) -> None:
    # invariant: bytes saved <= bytes the group's ops move; a pure chain of n ops saves n - 1
    # launches and 2·(n - 1) tensor transfers (each intermediate written once, read once)
    def chain(x):
        y = x
        for name in ops:
            y = {
                "relu": torch.relu,
                "neg": torch.neg,
                "exp": torch.exp,
                "add_self": lambda t: t + t,
                "mul_x": lambda t: t * x,
            }[name](y)
        return y

    from aiprof.tensor.costmodel import op_cost

    x = torch.randn(rows, 16)
    calls = _forward_calls(chain, (x,))
    report = analyze_fusion(calls)
    moved = sum(op_cost(c).bytes_total for c in calls)
    assert report.total_bytes_saved <= moved
    if len(ops) > 1 and "add_self" not in ops:
        (group,) = report.groups
        assert group.launches_saved == len(ops) - 1
        assert group.bytes_saved == 2 * (len(ops) - 1) * x.numel() * 4
