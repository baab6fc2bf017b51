"""Cost functions of the memory-bound families: elementwise, reductions, normalization, softmax,
embedding, pooling, data movement, views and factories.

FLOPs of these ops are a convention, not a measurement: FlopCounterMode counts them as 0. aiprof
counts one FLOP per arithmetic operation per output element (per input element for reductions
and normalizations), with a transcendental function (exp, erf, tanh) counted as one operation;
the per-element counts are in the tables below. Their bytes are exact compulsory traffic, and
they are memory-bound on every GPU of gpu-models.md §6.5 whatever the convention.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from aiprof.tensor.dtypes import element_bytes
from aiprof.tensor.flops import conv_output_shape
from aiprof.tensor.opcall import OpCall, TensorMeta
from aiprof.tensor.opcost import OpCost, arg, first_precision, int_list, read_all, written

CostFn = Callable[[OpCall], OpCost]

# FLOPs per output element (documented convention above).
ELEMENTWISE_FLOPS_PER_ELEMENT: dict[str, int] = {
    **dict.fromkeys(
        "add sub rsub mul div neg abs relu clamp clamp_min clamp_max hardtanh maximum minimum "
        "where masked_fill eq ne lt le gt ge exp log log1p sqrt rsqrt reciprocal pow sin cos tanh "
        "sigmoid erf sign floor ceil round trunc logical_not logical_and logical_or bitwise_and "
        "bitwise_or bitwise_not threshold threshold_backward square fmod remainder log2 log10 exp2 "
        "sgn expm1 atan asin acos sinh cosh isnan nan_to_num".split(),
        1,
    ),
    **dict.fromkeys("addcmul addcdiv lerp leaky_relu sigmoid_backward tanh_backward".split(), 2),
    **dict.fromkeys(
        "silu hardsigmoid elu softplus native_dropout native_dropout_backward".split(), 3
    ),
    **dict.fromkeys("hardswish mish silu_backward hardswish_backward".split(), 4),
    # GELU erf form 0.5·x·(1 + erf(x/√2)): mul, erf, add, mul, mul (torch.nn.GELU docs).
    "gelu": 5,
    "gelu_backward": 8,
}
REDUCTION_FLOPS_PER_INPUT: dict[str, int] = {
    **dict.fromkeys(
        "sum mean amax amin max min argmax argmin prod any all cumsum nansum".split(), 1
    ),
    **dict.fromkeys("norm linalg_vector_norm".split(), 2),
    **dict.fromkeys("var std var_mean std_mean logsumexp".split(), 3),
}
# Normalization: statistics (sum and sum of squares, 3) + normalize and affine (4) per element
# in training forward; 4 with running statistics; 4 for RMS norm; backward 10.
NORM_FLOPS_PER_ELEMENT: dict[str, int] = {
    **dict.fromkeys(
        "native_batch_norm _native_batch_norm_legit batch_norm cudnn_batch_norm miopen_batch_norm "
        "native_layer_norm layer_norm native_group_norm group_norm _batch_norm_impl_index".split(),
        7,
    ),
    **dict.fromkeys("_native_batch_norm_legit_no_training rms_norm _fused_rms_norm".split(), 4),
    **dict.fromkeys(
        "native_batch_norm_backward cudnn_batch_norm_backward native_layer_norm_backward "
        "native_group_norm_backward _fused_rms_norm_backward batch_norm_backward".split(),
        10,
    ),
}
SOFTMAX_FLOPS_PER_ELEMENT: dict[str, int] = {
    **dict.fromkeys(
        "_softmax softmax _log_softmax log_softmax".split(), 5
    ),  # max, sub, exp, sum, div
    **dict.fromkeys("_softmax_backward_data _log_softmax_backward_data".split(), 4),
}
VIEW_OPS = frozenset(
    "view _unsafe_view reshape _reshape_alias as_strided as_strided_ t transpose permute expand "
    "expand_as "
    "squeeze unsqueeze slice select narrow split split_with_sizes chunk unbind detach alias "
    "lift_fresh view_as unfold diagonal flatten unflatten numpy_T movedim swapaxes".split()
)
COPY_OPS = frozenset(
    "copy_ clone _to_copy to _copy_from cat stack index_select gather scatter scatter_add index "
    "index_put_ index_put repeat constant_pad_nd pad flip roll tril triu masked_select "
    "_unsafe_index narrow_copy slice_scatter select_scatter".split()
)
FACTORY_OPS = frozenset(
    "empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like "
    "full full_like new_zeros new_ones new_full fill_ zero_ scalar_tensor arange resize_".split()
)


def _broadcast_shape(tensors: list[TensorMeta]) -> tuple[int, ...]:
    width = max((len(t.shape) for t in tensors), default=0)
    out = [1] * width
    for tensor in tensors:
        for i, size in enumerate((1,) * (width - len(tensor.shape)) + tensor.shape):
            out[i] = max(out[i], size)
    return tuple(out)


def _make(
    call: OpCall,
    family: str,
    flops: int,
    out: list[tuple[tuple[int, ...], str]],
    read: int | None = None,
) -> OpCost:
    return OpCost(
        op=call.op,
        family=family,
        flops=flops,
        bytes_read=read_all(call) if read is None else read,
        bytes_written=written(call, out),
        precision=first_precision(call),
    )


def _elementwise(call: OpCall) -> OpCost:
    name = call.op.rstrip("_")
    tensors = call.tensors()
    shape = call.outputs[0].shape if call.outputs else _broadcast_shape(tensors)
    dtype = tensors[0].dtype if tensors else "float32"
    flops = ELEMENTWISE_FLOPS_PER_ELEMENT[name] * math.prod(shape)
    return _make(call, "elementwise", flops, [(shape, dtype)])


def _reduction(call: OpCall) -> OpCost:
    x = call.tensor(0)
    numel = x.numel if x else 0
    shape: tuple[int, ...] = ()
    if x is not None and isinstance(arg(call, 1), (list, tuple)):
        dims = {d % max(len(x.shape), 1) for d in int_list(arg(call, 1))}
        shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
    dtype = x.dtype if x else "float32"
    flops = REDUCTION_FLOPS_PER_INPUT[call.op] * numel
    return _make(call, "reduction", flops, [(shape, dtype)])


def _same_shape(family: str, table: dict[str, int]) -> CostFn:
    """Ops whose main output has the shape of the first tensor argument."""

    def cost(call: OpCall) -> OpCost:
        x = call.tensors()[0]
        return _make(call, family, table[call.op] * x.numel, [(x.shape, x.dtype)])

    return cost


def _embedding(call: OpCall) -> OpCost:
    weight, indices = call.tensor(0), call.tensor(1)
    if weight is None or indices is None:
        return _make(call, "embedding", 0, [])
    row_bytes = weight.nbytes // max(weight.shape[0], 1)
    gathered = indices.numel * row_bytes
    read = gathered + indices.nbytes
    return _make(
        call,
        "embedding",
        0,
        [((gathered // max(row_bytes, 1), *weight.shape[1:]), weight.dtype)],
        read,
    )


def _embedding_backward(call: OpCall) -> OpCost:
    grad = call.tensors()[0]
    num_weights = int_list(arg(call, 2), (0,))[0]
    shape = (num_weights, grad.shape[-1])
    return _make(call, "embedding", grad.numel, [(shape, grad.dtype)])


def _nll_loss(call: OpCall) -> OpCost:
    """nll_loss_forward(self [N, C], target [N], ...): reads one value per target (gathered)."""
    x, target = call.tensor(0), call.tensor(1)
    if x is None or target is None:
        return _make(call, "reduction", 0, [])
    read = target.nbytes + target.numel * element_bytes(x.dtype)
    return _make(call, "reduction", target.numel, [((), x.dtype), ((), x.dtype)], read)


def _nll_loss_backward(call: OpCall) -> OpCost:
    """nll_loss_backward(grad_out, self, target, ...): writes a dense grad_input of self's shape."""
    x, target = call.tensor(1), call.tensor(2)
    if x is None or target is None:
        return _make(call, "reduction", 0, [])
    return _make(call, "reduction", target.numel, [(x.shape, x.dtype)], read_all(call, skip=(1,)))


def _pool(call: OpCall) -> OpCost:
    x = call.tensors()[0]
    if "backward" in call.op:
        return _make(call, "pooling", x.numel, [(call.tensors()[1].shape, x.dtype)])
    if call.op.startswith(("_adaptive", "adaptive")):
        size = int_list(arg(call, 1), (1,))
        out = (*x.shape[: -len(size)], *size)
        return _make(call, "pooling", x.numel, [(out, x.dtype)])
    kernel = int_list(arg(call, 1), (1,))
    stride = int_list(arg(call, 2), kernel) or kernel
    spatial = len(x.shape) - 2
    fake_w = (x.shape[1], 1, *(kernel * spatial if len(kernel) == 1 else kernel))
    out = (
        call.outputs[0].shape
        if call.outputs
        else conv_output_shape(
            x.shape, fake_w, stride, int_list(arg(call, 3), (0,)), int_list(arg(call, 4), (1,))
        )
    )
    outs = [(out, x.dtype)] + ([(out, "int64")] if "indices" in call.op else [])
    return _make(call, "pooling", math.prod(out) * math.prod(fake_w[2:]), outs)


def _data_movement(call: OpCall) -> OpCost:
    tensors = call.tensors()
    if call.op == "copy_":
        dst = tensors[0]
        return _make(call, "data_movement", 0, [(dst.shape, dst.dtype)], read_all(call, skip=(0,)))
    if call.op in ("cat", "stack"):
        total = sum(t.numel for t in tensors)
        return _make(call, "data_movement", 0, [((total,), tensors[0].dtype)])
    return _make(
        call, "data_movement", 0, [(tensors[0].shape, tensors[0].dtype)] if tensors else []
    )


def _contiguous(call: OpCall) -> OpCost:
    x = call.tensor(0)
    if x is None or x.is_contiguous:
        return _view(call)
    return _make(call, "data_movement", 0, [(x.shape, x.dtype)])


def _view(call: OpCall) -> OpCost:
    return OpCost(call.op, "view", 0, 0, 0, first_precision(call))


def _factory(call: OpCall) -> OpCost:
    if call.op.startswith(("empty", "new_empty", "resize")):
        return OpCost(call.op, "factory", 0, 0, 0, first_precision(call))
    like = call.tensor(0)
    fallback = [(like.shape, like.dtype)] if like is not None else []
    return _make(call, "factory", 0, fallback, 0)


def memory_costs() -> dict[str, CostFn]:
    """Op name -> cost function for every memory-bound family."""
    table: dict[str, CostFn] = {}
    for name in ELEMENTWISE_FLOPS_PER_ELEMENT:
        table[name] = table[name + "_"] = _elementwise
    table.update(dict.fromkeys(REDUCTION_FLOPS_PER_INPUT, _reduction))
    table.update(
        dict.fromkeys(NORM_FLOPS_PER_ELEMENT, _same_shape("normalization", NORM_FLOPS_PER_ELEMENT))
    )
    table.update(
        dict.fromkeys(SOFTMAX_FLOPS_PER_ELEMENT, _same_shape("softmax", SOFTMAX_FLOPS_PER_ELEMENT))
    )
    table.update(dict.fromkeys(VIEW_OPS, _view))
    table.update(dict.fromkeys(COPY_OPS, _data_movement))
    table.update(dict.fromkeys(FACTORY_OPS, _factory))
    table["contiguous"] = _contiguous
    table["embedding"] = _embedding
    table["embedding_dense_backward"] = _embedding_backward
    table["nll_loss_forward"] = table["nll_loss2d_forward"] = _nll_loss
    table["nll_loss_backward"] = table["nll_loss2d_backward"] = _nll_loss_backward
    for name in (
        "max_pool2d max_pool2d_with_indices max_pool3d_with_indices avg_pool2d avg_pool3d "
        "adaptive_avg_pool2d _adaptive_avg_pool2d adaptive_max_pool2d "
        "max_pool2d_with_indices_backward "
        "avg_pool2d_backward _adaptive_avg_pool2d_backward".split()
    ):
        table[name] = _pool
    return table
