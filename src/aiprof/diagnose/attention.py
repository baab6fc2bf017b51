"""Hand-written attention, and what ``F.scaled_dot_product_attention`` would take instead.

Found from the ops' recorded shapes (record_shapes): a matmul ``[..., Sq, D] @ [..., D, Sk]``
(the scores), then, on the same thread, the next matmul ``[..., Sq, Sk] @ [..., Sk, Dv]`` (the
weighted values); everything launched between them (scale, mask, softmax, dropout) belongs to
the attention. Its backward is what the autograd engine ran for the same sequence numbers.

The model (aiprof's; what a fused kernel still reads and writes): a fused attention kernel
never writes the ``Sq x Sk`` scores to memory. It reads Q, K, V and writes the output once and
does the two products' FLOPs, so its time is the roofline ``max(FLOPs / peak, bytes / DRAM
bandwidth)`` with FLOPs = 4 N Sq Sk D (N the batch x heads) and bytes = N (Sq D + Sk D + Sk Dv +
Sq Dv) x the element size. Its backward recomputes the scores: 2.5 x the forward's FLOPs (the
FlashAttention-2 paper's count: five products against two) and twice its bytes (Q, K, V, O and
dO read, dQ, dK, dV written). A real kernel stays below the roof, so this is the fix's bound;
the region's kernels are replaced only where they took longer than it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.tensor_cores import HALF_TYPES
from aiprof.trace import Trace

MATMUL = re.compile(r"^aten::(matmul|bmm|baddbmm)$")
BACKWARD = re.compile(r"Backward|^autograd::")
MIN_SEQ = 128
"""Shorter sequences: the scores are small, fusing them saves little (aiprof's threshold)."""
BACKWARD_FLOPS = 2.5
"""Backward / forward FLOPs of fused attention (FlashAttention-2, Dao 2023, section 3.1)."""
BACKWARD_BYTES = 2.0
"""Backward / forward bytes: Q, K, V, O, dO read and dQ, dK, dV written against Q, K, V, O."""


@dataclass(frozen=True)
class Attention:
    """One hand-written attention: its kernels forward and backward and the fused roofline."""

    forward_rows: np.ndarray
    backward_rows: np.ndarray
    forward_us: float
    backward_us: float
    heads_x_batch: int
    seq_q: int
    seq_k: int
    head_dim: int
    half: bool


def _dims(trace: Trace, row: int) -> list[list[int]]:
    """The two matrix operands' dims (``baddbmm``'s first input is the added tensor)."""
    dims = trace.json_value(int(trace.cpu_ops.input_dims_id[row]))
    dims = [d for d in (dims or []) if isinstance(d, list)]
    if trace.name(int(trace.cpu_ops.name_id[row])) == "aten::baddbmm":
        dims = dims[1:]
    return dims


def _half(trace: Trace, row: int) -> bool:
    types = trace.json_value(int(trace.cpu_ops.input_types_id[row]))
    return any(t in HALF_TYPES for t in (types or []) if isinstance(t, str))


def _is_scores(a: list[int], b: list[int]) -> bool:
    return (len(a) >= 3 and len(b) == len(a) and b[-2] == a[-1] and a[-2] >= MIN_SEQ
            and b[-1] >= MIN_SEQ)


def _kernels_in(trace: Trace, spans: list[tuple[float, float, int]]) -> np.ndarray:
    """Kernels whose launch call lies inside one of ``spans`` (start, end, thread)."""
    ops, rt = trace.gpu_ops, trace.runtime
    rows = np.flatnonzero(ops.launch_row[: len(trace.kernels)] >= 0)
    at, tid = rt.ts_us[ops.launch_row[rows]], rt.tid[ops.launch_row[rows]]
    hit = np.zeros(len(rows), dtype=bool)
    for start, end, thread in spans:
        hit |= (at >= start) & (at <= end) & (tid == thread)
    return rows[hit]


def find_attention(trace: Trace, peak_flops: float, bandwidth: float,
                   peak_fp32: float | None = None) -> list[Attention]:
    """Every hand-written attention of the trace with the fused kernel's roofline times."""
    ops = trace.cpu_ops
    is_mm = trace.strings.mask(ops.name_id, MATMUL)
    if not is_mm.any():
        return []
    ends = ops.ts_us + ops.dur_us
    is_mm &= ~_inside_backward(trace)
    found: list[Attention] = []
    for tid in np.unique(ops.tid[is_mm]):
        mine = np.flatnonzero(is_mm & (ops.tid == tid))
        mine = mine[np.argsort(ops.ts_us[mine], kind="stable")]
        last_end = -np.inf
        for i, row in enumerate(mine.tolist()):
            dims = _dims(trace, row)
            if ops.ts_us[row] < last_end or len(dims) < 2 or not _is_scores(dims[0], dims[1]):
                continue
            a, b = dims[0], dims[1]
            pv = next((r for r in mine[i + 1:].tolist() if ops.ts_us[r] >= ends[row]
                       and len(pd := _dims(trace, r)) >= 2 and pd[0][-2:] == [a[-2], b[-1]]
                       and pd[1][-2] == b[-1]), None)
            if pv is None:
                continue
            last_end = float(ends[pv])
            n, sq, sk, d = prod(a[:-2]), a[-2], b[-1], a[-1]
            dv = _dims(trace, pv)[1][-1]
            half = _half(trace, row)
            elem = 2 if half else 4
            peak = peak_flops if half or not peak_fp32 else peak_fp32
            flops = 4.0 * n * sq * sk * d
            nbytes = float(n * (sq * d + sk * d + sk * dv + sq * dv) * elem)
            fwd = max(flops / peak, nbytes / bandwidth) * 1e6
            bwd = max(BACKWARD_FLOPS * flops / peak, BACKWARD_BYTES * nbytes / bandwidth) * 1e6
            forward = _kernels_in(trace, [(float(ops.ts_us[row]), last_end, int(tid))])
            backward = _backward_kernels(trace, int(ops.sequence_number[row]),
                                         int(ops.sequence_number[pv]))
            found.append(Attention(forward, backward, fwd, bwd, n, sq, sk, d, half))
    return found


def _inside_backward(trace: Trace) -> np.ndarray:
    """Per CPU op: whether it runs inside an autograd backward function (its thread's)."""
    ops = trace.cpu_ops
    inside = np.zeros(len(ops), dtype=bool)
    backward = trace.strings.mask(ops.name_id, BACKWARD)
    for tid in np.unique(ops.tid[backward]):
        spans = iv.union(ops.ts_us[backward & (ops.tid == tid)],
                         (ops.ts_us + ops.dur_us)[backward & (ops.tid == tid)])
        mine = ops.tid == tid
        inside[mine] = iv.contains(spans, ops.ts_us[mine])
    return inside


def _backward_kernels(trace: Trace, first_seq: int, last_seq: int) -> np.ndarray:
    """Kernels the autograd engine launched for the forward ops numbered first..last."""
    ops = trace.cpu_ops
    if first_seq < 0 or last_seq < first_seq:
        return np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero((ops.sequence_number >= first_seq) & (ops.sequence_number <= last_seq)
                          & trace.strings.mask(ops.name_id, BACKWARD)).tolist()
    spans = [(float(ops.ts_us[r]), float(ops.ts_us[r] + ops.dur_us[r]), int(ops.tid[r]))
             for r in rows]
    return _kernels_in(trace, spans) if spans else np.zeros(0, dtype=np.int64)


def fused_durations(trace: Trace, found: list[Attention]) -> dict[int, float]:
    """Each region's kernels replaced by one at the fused roofline (where that is shorter)."""
    dur = trace.gpu_ops.dur_us
    new: dict[int, float] = {}
    for att in found:
        for rows, fused in ((att.forward_rows, att.forward_us), (att.backward_rows,
                                                                  att.backward_us)):
            if len(rows) == 0 or float(dur[rows].sum()) <= fused:
                continue
            keep = int(rows[int(np.argmax(dur[rows]))])
            new.update({int(r): 0.0 for r in rows.tolist()})
            new[keep] = fused
    return new
