"""GIVEN op calls built by hand WHEN costed THEN FLOPs and compulsory bytes equal the textbook
formulas (GEMM 2·M·N·K, bytes = each operand once), and unknown ops are counted, not guessed."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.errors import InputError
from aiprof.tensor.costmodel import op_cost, summarize
from aiprof.tensor.dtypes import canonical_dtype, element_bytes
from aiprof.tensor.opcall import OpCall, TensorMeta, normalize_op_name


def T(*shape: int, dtype: str = "float32", strides: tuple[int, ...] | None = None) -> TensorMeta:
    return TensorMeta(tuple(shape), dtype, strides)


@pytest.mark.parametrize("name", ["aten::mm", "aten.mm.default", "mm", "torch.ops.aten.mm"])
def test_op_name_spellings(name: str) -> None:
    assert normalize_op_name(name) == "mm"


def test_dtype_spellings_from_traces_and_torch() -> None:
    assert element_bytes("c10::BFloat16") == 2
    assert element_bytes("float") == 4
    assert element_bytes("long int") == 8
    assert canonical_dtype("torch.float16") == "float16"
    assert canonical_dtype("Scalar") is None
    with pytest.raises(InputError):
        element_bytes("TensorList")


def test_mm_is_the_reference_fp32_gemm() -> None:
    # gpu-models.md §6.1: FP32 1024^3 GEMM: 2.147e9 FLOPs, 12,582,912 compulsory bytes.
    cost = op_cost(OpCall("aten::mm", (T(1024, 1024), T(1024, 1024))))
    assert cost.flops == 2 * 1024**3
    assert cost.bytes_total == 12_582_912
    assert cost.intensity_flop_per_byte == pytest.approx(170.67, abs=0.01)


@given(
    m=st.integers(1, 300),
    n=st.integers(1, 300),
    k=st.integers(1, 300),
    b=st.integers(1, 4),
    dtype=st.sampled_from(["float32", "bfloat16", "float16"]),
)
def test_matmul_family_flops_and_bytes(m: int, n: int, k: int, b: int, dtype: str) -> None:
    e = element_bytes(dtype)
    addmm = op_cost(
        OpCall("aten::addmm", (T(n, dtype=dtype), T(m, k, dtype=dtype), T(k, n, dtype=dtype)))
    )
    assert addmm.flops == 2 * m * n * k
    assert addmm.bytes_read == (n + m * k + k * n) * e
    assert addmm.bytes_written == m * n * e
    bmm = op_cost(OpCall("bmm", (T(b, m, k, dtype=dtype), T(b, k, n, dtype=dtype))))
    assert bmm.flops == 2 * b * m * n * k
    linear = op_cost(OpCall("aten::linear", (T(b, m, k, dtype=dtype), T(n, k, dtype=dtype))))
    assert linear.flops == 2 * b * m * n * k
    matmul = op_cost(OpCall("aten::matmul", (T(b, m, k, dtype=dtype), T(k, n, dtype=dtype))))
    assert matmul.flops == 2 * b * m * n * k


@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.integers(1, 200), grow=st.integers(1, 50))
def test_cost_is_monotone_in_size(m: int, n: int, k: int, grow: int) -> None:
    small = op_cost(OpCall("mm", (T(m, k), T(k, n))))
    large = op_cost(OpCall("mm", (T(m + grow, k), T(k, n))))
    assert large.flops > small.flops and large.bytes_total > small.bytes_total


def test_conv_from_trace_arguments_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.empty(8, 3, 224, 224, device="meta")
    w = torch.empty(64, 3, 7, 7, device="meta")
    with FlopCounterMode(display=False) as counter:
        out = torch.nn.functional.conv2d(x, w, stride=2, padding=3)
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, ...) as a trace records it
    call = OpCall(
        "aten::cudnn_convolution",
        (
            T(8, 3, 224, 224, dtype="c10::Half"),
            T(64, 3, 7, 7, dtype="c10::Half"),
            (3, 3),
            (2, 2),
            (1, 1),
            1,
        ),
    )
    cost = op_cost(call)
    assert cost.flops == counter.get_total_flops()
    assert cost.bytes_written == math.prod(out.shape) * 2
    assert cost.precision == "fp16"


def test_attention_matches_torch_formula() -> None:
    flop_counter = pytest.importorskip("torch.utils.flop_counter")
    q, k, v = (2, 8, 128, 64), (2, 2, 256, 64), (2, 2, 256, 64)  # GQA: 8 query, 2 kv heads
    cost = op_cost(OpCall("aten::_scaled_dot_product_flash_attention", (T(*q), T(*k), T(*v))))
    assert cost.flops == flop_counter.sdpa_flop_count(q, k, v)
    back = op_cost(
        OpCall("aten::_scaled_dot_product_flash_attention_backward", (T(*q), T(*q), T(*k), T(*v)))
    )
    assert back.flops == flop_counter.sdpa_backward_flop_count(q, q, k, v)


def test_elementwise_inplace_and_broadcast_bytes() -> None:
    relu = op_cost(OpCall("aten::relu_", (T(64, 128, dtype="c10::BFloat16"),)))
    assert relu.bytes_read == relu.bytes_written == 64 * 128 * 2
    assert relu.flops == 64 * 128
    bias = T(128, strides=None)
    add = op_cost(OpCall("aten::add", (T(64, 128), bias)))
    assert add.bytes_read == (64 * 128 + 128) * 4  # the bias is read once, not 64 times
    expanded = TensorMeta((64, 128), "float32", (0, 1))
    assert op_cost(OpCall("aten::mul", (T(64, 128), expanded))).bytes_read == (64 * 128 + 128) * 4


def test_views_cost_nothing_and_copies_move_bytes() -> None:
    assert op_cost(OpCall("aten::permute", (T(2, 3, 4), (0, 2, 1)))).bytes_total == 0
    permuted = TensorMeta((2, 4, 3), "float32", (12, 1, 4))
    clone = op_cost(OpCall("aten::clone", (permuted,)))
    assert clone.bytes_total == 2 * 24 * 4 and clone.flops == 0
    assert op_cost(OpCall("aten::contiguous", (T(2, 3, 4),))).family == "view"
    cat = op_cost(OpCall("aten::cat", ((T(2, 3), T(5, 3)), 0)))
    assert cat.bytes_read == cat.bytes_written == 7 * 3 * 4


def test_embedding_reads_only_the_gathered_rows() -> None:
    cost = op_cost(OpCall("aten::embedding", (T(50000, 768), T(4, 128, dtype="int64"))))
    assert cost.bytes_read == 4 * 128 * 768 * 4 + 4 * 128 * 8
    assert cost.bytes_written == 4 * 128 * 768 * 4


def test_pooling_output_from_trace_arguments() -> None:
    call = OpCall(
        "aten::max_pool2d_with_indices", (T(8, 64, 112, 112), (3, 3), (2, 2), (1, 1), (1, 1), False)
    )
    cost = op_cost(call)
    out = 8 * 64 * 56 * 56
    assert cost.bytes_written == out * 4 + out * 8  # values and int64 indices
    assert cost.flops == out * 9


def test_unknown_ops_are_counted_not_guessed() -> None:
    unknown = op_cost(OpCall("aten::my_custom_op", (T(1024, 1024),)))
    assert not unknown.has_model and unknown.family == "no_cost_model"
    assert unknown.flops == unknown.bytes_total == 0
    no_shapes = op_cost(OpCall("aten::mm", ()))
    assert not no_shapes.has_model and "incomplete" in no_shapes.note
    summary = summarize([unknown, no_shapes, op_cost(OpCall("mm", (T(2, 2), T(2, 2))))])
    assert summary.num_ops == 3 and summary.num_ops_without_model == 2
    assert summary.ops_without_model == {"my_custom_op": 1, "mm": 1}
    assert summary.total_flops == 16


def test_loss_and_cudnn_attention_as_recorded_by_torch_2_11() -> None:
    # shapes as in the GPT-2 H200 trace (tests/data/tensor/gpt2.trace.json.gz)
    nll = op_cost(
        OpCall("aten::nll_loss_forward", (T(4096, 50257), T(4096, dtype="long int"), None, 1, -100))
    )
    assert nll.bytes_read == 4096 * 8 + 4096 * 4  # targets and one gathered logit per row
    back = op_cost(
        OpCall("aten::nll_loss_backward", (T(), T(4096, 50257), T(4096, dtype="long int")))
    )
    assert back.bytes_written == 4096 * 50257 * 4
    q = T(8, 12, 512, 64, dtype="c10::BFloat16")
    attention = op_cost(OpCall("aten::_cudnn_attention_forward", (q, q, q)))
    assert attention.flops == 2 * (2 * 8 * 12 * 512 * 512 * 64)
    assert attention.family == "attention" and attention.precision == "bf16"
