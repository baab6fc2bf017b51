"""Cost functions of the tensor-core families: matmul, convolution, attention.

Argument positions follow the ATen schemas (``native_functions.yaml`` in the PyTorch source).
FLOPs come from :mod:`aiprof.tensor.flops` (FlopCounterMode's conventions).
"""

from __future__ import annotations

from collections.abc import Callable

from aiprof.errors import InputError
from aiprof.tensor import flops as F
from aiprof.tensor.opcall import OpCall, TensorMeta
from aiprof.tensor.opcost import OpCost, arg, first_precision, int_list, read_all, written

CostFn = Callable[[OpCall], OpCost]


def _need(call: OpCall, *indices: int) -> list[TensorMeta]:
    tensors = [call.tensor(i) for i in indices]
    if any(t is None for t in tensors):
        raise InputError(f"{call.op}: tensor arguments {indices} are missing from the record")
    return tensors  # type: ignore[return-value]


def _cost(call: OpCall, family: str, flops: int, out: list[tuple[tuple[int, ...], str]]) -> OpCost:
    return OpCost(
        op=call.op,
        family=family,
        flops=flops,
        bytes_read=read_all(call),
        bytes_written=written(call, out),
        precision=first_precision(call),
    )


def _mm(a_index: int, b_index: int, batched: bool) -> CostFn:
    def cost(call: OpCall) -> OpCost:
        a, b = _need(call, a_index, b_index)
        fn = F.bmm_flops if batched else F.mm_flops
        out_shape = (*a.shape[:-1], b.shape[-1])
        return _cost(call, "matmul", fn(a.shape, b.shape), [(out_shape, a.dtype)])

    return cost


def _matmul(call: OpCall) -> OpCost:
    a, b = _need(call, 0, 1)
    out = (*a.shape[:-1], b.shape[-1]) if len(b.shape) > 1 else a.shape[:-1]
    return _cost(call, "matmul", F.matmul_flops(a.shape, b.shape), [(out, a.dtype)])


def _linear(call: OpCall) -> OpCost:
    x, w = _need(call, 0, 1)
    out = (*x.shape[:-1], w.shape[0])
    return _cost(call, "matmul", F.linear_flops(x.shape, w.shape), [(out, x.dtype)])


def _conv(
    stride_at: int,
    pad_at: int,
    dil_at: int | None,
    transposed_at: int | None,
    groups_at: int | None,
) -> CostFn:
    """A forward convolution whose stride/padding/... sit at the given schema positions."""

    def cost(call: OpCall) -> OpCost:
        x, w = _need(call, 0, 1)
        transposed = bool(arg(call, transposed_at, False)) if transposed_at is not None else False
        if call.outputs:
            out = call.outputs[0].shape
        else:
            out = F.conv_output_shape(
                x.shape,
                w.shape,
                int_list(arg(call, stride_at), (1,)),
                int_list(arg(call, pad_at), (0,)),
                int_list(arg(call, dil_at), (1,)),
                transposed,
                int_list(arg(call, transposed_at + 1 if transposed_at else None), (0,)),
                int_list(arg(call, groups_at), (1,))[0],
            )
        return _cost(
            call, "convolution", F.conv_flops(x.shape, w.shape, out, transposed), [(out, x.dtype)]
        )

    return cost


def _conv_nd(call: OpCall) -> OpCost:
    """conv1d/conv2d/conv3d(input, weight, bias, stride, padding, dilation, groups)."""
    if isinstance(arg(call, 4), str):  # padding="same" / "valid"
        if call.outputs is None:
            raise InputError(f"{call.op}: string padding needs the recorded output shape")
    return _conv(3, 4, 5, None, 6)(call)


def _conv_backward(call: OpCall) -> OpCost:
    """convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)."""
    grad_out, x, w = _need(call, 0, 1, 2)
    transposed = bool(arg(call, 7, False))
    mask = tuple(bool(v) for v in int_list(arg(call, 10), (1, 1, 1)))
    flops = F.conv_backward_flops(grad_out.shape, x.shape, w.shape, transposed, mask)
    outs = [(x.shape, x.dtype)] * mask[0] + [(w.shape, w.dtype)] * mask[1]
    outs += [((w.shape[0],), w.dtype)] * (mask[2] if len(mask) > 2 else 0)
    return _cost(call, "convolution", flops, outs)


def _attention(call: OpCall) -> OpCost:
    """Attention forward: (query, key, value, ...); output [b, h, s_q, d_v] (+ small stats)."""
    q, k, v = _need(call, 0, 1, 2)
    out = (*q.shape[:-1], v.shape[-1])
    flops = F.attention_flops(q.shape, k.shape, v.shape)
    return _cost(call, "attention", flops, [(out, q.dtype)])


def _attention_backward(call: OpCall) -> OpCost:
    """Attention backward: (grad_out, query, key, value, ...); writes dq, dk, dv."""
    g, q, k, v = _need(call, 0, 1, 2, 3)
    flops = F.attention_backward_flops(g.shape, q.shape, k.shape, v.shape)
    return _cost(call, "attention", flops, [(t.shape, t.dtype) for t in (q, k, v)])


_CONV_FORWARD = _conv(3, 4, 5, 6, 8)  # convolution / _convolution schema
COMPUTE_COSTS: dict[str, CostFn] = {
    "mm": _mm(0, 1, False),
    "addmm": _mm(1, 2, False),
    "_addmm_activation": _mm(1, 2, False),
    "_scaled_mm": _mm(0, 1, False),
    "bmm": _mm(0, 1, True),
    "baddbmm": _mm(1, 2, True),
    "matmul": _matmul,
    "linear": _linear,
    "convolution": _CONV_FORWARD,
    "_convolution": _CONV_FORWARD,
    "convolution_overrideable": _CONV_FORWARD,
    "conv1d": _conv_nd,
    "conv2d": _conv_nd,
    "conv3d": _conv_nd,
    "cudnn_convolution": _conv(
        3, 2, 4, None, 5
    ),  # (self, weight, padding, stride, dilation, groups)
    "mkldnn_convolution": _conv(
        4, 3, 5, None, 6
    ),  # (self, weight, bias, padding, stride, dilation, groups)
    "_slow_conv2d_forward": _conv(
        4, 5, None, None, None
    ),  # (self, weight, kernel, bias, stride, pad)
    "convolution_backward": _conv_backward,
    "scaled_dot_product_attention": _attention,
    "_scaled_dot_product_flash_attention": _attention,
    "_scaled_dot_product_efficient_attention": _attention,
    "_scaled_dot_product_cudnn_attention": _attention,
    "_scaled_dot_product_flash_attention_for_cpu": _attention,
    "_flash_attention_forward": _attention,
    "_efficient_attention_forward": _attention,
    "_cudnn_attention_forward": _attention,
    "_scaled_dot_product_flash_attention_backward": _attention_backward,
    "_scaled_dot_product_efficient_attention_backward": _attention_backward,
    "_scaled_dot_product_cudnn_attention_backward": _attention_backward,
    "_scaled_dot_product_flash_attention_for_cpu_backward": _attention_backward,
    "_flash_attention_backward": _attention_backward,
    "_efficient_attention_backward": _attention_backward,
    "_cudnn_attention_backward": _attention_backward,
}
"""Op name -> cost function for the matmul, convolution and attention families."""
