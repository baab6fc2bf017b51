"""GIVEN standard models WHEN analyze_model records their ops THEN the matmul, convolution and
attention FLOPs equal torch's FlopCounterMode, forward and backward, op by op."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from aiprof.measure.tensor.model_analysis import analyze_model  # noqa: E402
from aiprof.tensor.costmodel import op_cost  # noqa: E402
from aiprof.tensor.opcall import OpCall, TensorMeta  # noqa: E402

from . import nets  # noqa: E402

# CPU attention ops that FlopCounterMode has no formula for (it counts them as 0); aiprof
# counts them with the same formula as the CUDA attention ops.
NOT_IN_FLOP_COUNTER = {
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
}


def _compare(model, inputs, backward: bool) -> tuple[Counter, Counter]:
    torch.manual_seed(0)
    with FlopCounterMode(display=False) as counter:
        analysis = analyze_model(model, inputs, backward=backward)
    theirs = Counter(
        {str(k).removeprefix("aten."): v for k, v in counter.get_flop_counts()["Global"].items()}
    )
    ours: Counter = Counter()
    for record in analysis.ops:
        if record.cost.family in ("matmul", "convolution", "attention"):
            ours[record.op] += record.cost.flops
    return ours, theirs


def _assert_equal(ours: Counter, theirs: Counter) -> None:
    assert theirs, "FlopCounterMode counted nothing: the comparison would be empty"
    for op, flops in theirs.items():
        assert ours[op] == flops, op
    extra = {op for op in ours if op not in theirs and ours[op]}
    assert extra <= NOT_IN_FLOP_COUNTER


# ResNet-50's backward is the slowest case (5 s on the 2-core VM) and adds no new kind of op:
# its forward runs by default, resnet18's backward and test_random_convolutions_match_flop_counter
# check convolution_backward (every kernel, stride, group); it runs with -m slow.
@pytest.mark.parametrize(("factory", "backward"), [
    pytest.param(nets.resnet18, False, id="fwd-resnet18"),
    pytest.param(nets.resnet18, True, id="fwd+bwd-resnet18"),
    pytest.param(nets.resnet50, False, id="fwd-resnet50"),
    pytest.param(nets.resnet50, True, id="fwd+bwd-resnet50", marks=pytest.mark.slow),
])
def test_resnets_match_flop_counter(factory, backward) -> None:
    model = factory()
    ours, theirs = _compare(model, (torch.randn(2, 3, 32, 32),), backward)
    _assert_equal(ours, theirs)
    assert "convolution" in theirs
    if backward:
        assert "convolution_backward" in theirs


@pytest.mark.parametrize("name", ["gpt2", "bert"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "fwd+bwd"])
def test_transformers_match_flop_counter(name, attn, backward) -> None:
    pytest.importorskip("transformers")
    model = getattr(nets, name)(attn)
    ids = torch.randint(0, 1000, (2, 32))
    ours, theirs = _compare(model, (ids,), backward)
    _assert_equal(ours, theirs)


def test_cpu_attention_counted_with_the_sdpa_formula() -> None:
    q = torch.randn(2, 4, 16, 8)
    k = torch.randn(2, 4, 24, 8)
    v = torch.randn(2, 4, 24, 8)
    fn = torch.nn.functional.scaled_dot_product_attention
    analysis = analyze_model(lambda a, b, c: fn(a, b, c), (q, k, v))
    attention = [r for r in analysis.ops if r.cost.family == "attention"]
    assert len(attention) == 1
    # two batched matmuls: [16x8]@[8x24] and [16x24]@[24x8], for 2x4 heads
    assert attention[0].cost.flops == 2 * 8 * (16 * 24 * 8) * 2


def test_grouped_conv_backward_follows_flop_counter_convention() -> None:
    # FlopCounterMode counts the weight gradient of a grouped conv with all input channels, so
    # a depthwise conv's backward is forward·(1 + groups), not the true 2·forward. aiprof keeps
    # the same count so that totals compare; the docs say so.
    conv = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
    x = torch.randn(2, 32, 16, 16, requires_grad=True)
    ours, theirs = _compare(conv, (x,), backward=True)
    _assert_equal(ours, theirs)
    forward = 2 * 2 * 32 * 1 * 9 * 16 * 16  # 2·N·C_out·(C_in/groups)·k²·out spatial
    assert ours["convolution"] == forward
    assert ours["convolution_backward"] == forward * (1 + 32)


@given(
    cin_per_group=st.integers(1, 3),
    cout_per_group=st.integers(1, 3),
    groups=st.integers(1, 3),
    kernel=st.integers(1, 3),
    stride=st.integers(1, 3),
    padding=st.integers(0, 2),
    dilation=st.integers(1, 2),
    size=st.integers(5, 9),
    transposed=st.booleans(),
)
@settings(max_examples=30, deadline=None)
def test_random_convolutions_match_flop_counter(
    cin_per_group, cout_per_group, groups, kernel, stride, padding, dilation, size, transposed
) -> None:
    cin, cout = cin_per_group * groups, cout_per_group * groups
    if transposed:
        conv = torch.nn.ConvTranspose2d(
            cin, cout, kernel, stride, padding, groups=groups, dilation=dilation
        )
    else:
        conv = torch.nn.Conv2d(cin, cout, kernel, stride, padding, dilation, groups)
    x = torch.randn(2, cin, size, size, requires_grad=True)
    try:
        conv(x)
    except RuntimeError:  # the configuration has no valid output size
        return
    ours, theirs = _compare(conv, (x,), backward=True)
    _assert_equal(ours, theirs)
    # the same convolution as a trace records it: no output shape, it is derived from the args
    meta = lambda t: TensorMeta(tuple(t.shape), "float32")  # noqa: E731
    pair = (stride, stride), (padding, padding), (dilation, dilation)
    call = OpCall(
        "aten::convolution", (meta(x), meta(conv.weight), None, *pair, transposed, (0, 0), groups)
    )
    assert op_cost(call).flops == theirs["convolution"]
