"""FLOPs of matmuls, convolutions and attention, counted as torch's FlopCounterMode counts them.

Source of every formula here: ``torch/utils/flop_counter.py`` (PyTorch 2.x): one multiply-add
is 2 FLOPs, bias additions and softmax are not counted, attention counts its two batched
matmuls (five in backward), a convolution counts ``2 · N · C_out · C_in/groups · prod(kernel) ·
prod(output spatial)`` (input spatial for a transposed one). These are re-derived, not copied;
``tests/tensor`` checks them against FlopCounterMode on whole models.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from aiprof.errors import InputError

Shape = Sequence[int]


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    """``2·M·N·K`` per matrix, times ``batch`` (reference: serving-and-distributed.md §B8)."""
    return 2 * batch * m * n * k


def mm_flops(a: Shape, b: Shape) -> int:
    """``[M,K] @ [K,N]``."""
    (m, k), (k2, n) = a, b
    _check(k == k2, f"mm: inner dimensions differ ({k} vs {k2})")
    return gemm_flops(m, n, k)


def bmm_flops(a: Shape, b: Shape) -> int:
    """``[B,M,K] @ [B,K,N]``."""
    (bt, m, k), (bt2, k2, n) = a, b
    _check(bt == bt2 and k == k2, f"bmm: shapes {list(a)} and {list(b)} do not multiply")
    return gemm_flops(m, n, k, bt)


def matmul_flops(a: Shape, b: Shape) -> int:
    """``torch.matmul`` with broadcasting: the mm/bmm FLOPs it decomposes into."""
    if len(a) == 1 and len(b) == 1:
        return 2 * a[0]
    a2 = (1, a[0]) if len(a) == 1 else tuple(a)
    b2 = (b[0], 1) if len(b) == 1 else tuple(b)
    m, k = a2[-2], a2[-1]
    k2, n = b2[-2], b2[-1]
    _check(k == k2, f"matmul: inner dimensions differ ({k} vs {k2})")
    batch = math.prod(_broadcast(a2[:-2], b2[:-2]))
    return gemm_flops(m, n, k, batch)


def linear_flops(x: Shape, weight: Shape) -> int:
    """``x[..., K] @ weight[N, K]^T``: the addmm/mm it decomposes into."""
    _check(len(weight) == 2 and x[-1] == weight[1], "linear: weight must be [N, K] with K = x[-1]")
    return gemm_flops(math.prod(x[:-1]), weight[0], weight[1])


def conv_output_shape(
    x: Shape,
    w: Shape,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool = False,
    output_padding: Sequence[int] = (),
    groups: int = 1,
) -> tuple[int, ...]:
    """Output shape of a convolution (formula of the torch.nn.Conv2d / ConvTranspose2d docs)."""
    spatial = len(x) - 2
    st, pad, dil = (_expand(v, spatial) for v in (stride, padding, dilation))
    out_pad = _expand(output_padding or (0,), spatial)
    kernel = w[2:]
    if transposed:
        sizes = [
            (x[i + 2] - 1) * st[i] - 2 * pad[i] + dil[i] * (kernel[i] - 1) + out_pad[i] + 1
            for i in range(spatial)
        ]
        return (x[0], w[1] * groups, *sizes)
    sizes = [
        (x[i + 2] + 2 * pad[i] - dil[i] * (kernel[i] - 1) - 1) // st[i] + 1 for i in range(spatial)
    ]
    return (x[0], w[0], *sizes)


def conv_flops(x: Shape, w: Shape, out: Shape, transposed: bool = False) -> int:
    """``2·N·prod(spatial)·prod(kernel)·w[0]·w[1]``; spatial of out (of x if transposed)."""
    spatial = (x if transposed else out)[2:]
    return 2 * x[0] * math.prod(spatial) * math.prod(w[2:]) * w[0] * w[1]


def conv_backward_flops(
    grad_out: Shape, x: Shape, w: Shape, transposed: bool, output_mask: Sequence[bool]
) -> int:
    """Input gradient as a (transposed) conv of grad_out with w; weight gradient as a conv of the
    batch-transposed input with grad_out (FlopCounterMode's decomposition; for grouped convs it
    counts the weight gradient with the full input channel count, as FlopCounterMode does)."""
    total = 0
    if output_mask[0]:
        total += conv_flops(grad_out, w, x, not transposed)
    if output_mask[1]:
        grad_w = (w[0], w[1], *w[2:])
        if transposed:
            total += conv_flops(_swap01(grad_out), _swap01(x), _swap01(grad_w))
        else:
            total += conv_flops(_swap01(x), _swap01(grad_out), _swap01(grad_w))
    return total


def attention_flops(q: Shape, k: Shape, v: Shape) -> int:
    """Scores ``q·kᵀ`` plus ``scores·v``; dims read as (batch, heads, seq, dim); GQA allowed."""
    b, h, s_q, d = q
    s_k, d_v = k[2], v[3]
    _check(k[1] > 0 and h % k[1] == 0, f"attention: {h} query heads, {k[1]} key heads")
    return gemm_flops(s_q, s_k, d, b * h) + gemm_flops(s_q, d_v, s_k, b * h)


def attention_backward_flops(grad_out: Shape, q: Shape, k: Shape, v: Shape) -> int:
    """The five batched matmuls of attention backward (recompute scores, dV, dP, dQ, dK)."""
    b, h, s_q, d = q
    s_k, d_v = k[2], v[3]
    bh = b * h
    return (
        gemm_flops(s_q, s_k, d, bh)
        + gemm_flops(s_q, s_k, d_v, bh)
        + gemm_flops(s_k, d_v, s_q, bh)
        + gemm_flops(s_q, d, s_k, bh)
        + gemm_flops(d, s_k, s_q, bh)
    )


def _swap01(shape: Shape) -> tuple[int, ...]:
    return (shape[1], shape[0], *shape[2:])


def _expand(values: Sequence[int] | int, n: int) -> list[int]:
    items = [values] if isinstance(values, int) else list(values)
    return items * n if len(items) == 1 else items


def _broadcast(a: Shape, b: Shape) -> tuple[int, ...]:
    width = max(len(a), len(b))
    pa = (1,) * (width - len(a)) + tuple(a)
    pb = (1,) * (width - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb, strict=True):
        _check(x == y or x == 1 or y == 1, f"matmul: batch dims {list(a)} and {list(b)} differ")
        out.append(max(x, y))
    return tuple(out)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise InputError(message)
