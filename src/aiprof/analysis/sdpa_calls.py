"""``F.scaled_dot_product_attention`` calls as the profiler records them: causal or not, with a
mask or without.

A call that gets no mask and is not causal can take another path inside a CUDA graph: a
library that decides whether a mask is needed from the data only when it is not tracing builds
one while a stream captures, and SDPA with that mask may run a slower backend. transformers
does (its ``is_tracing`` counts a capturing stream): on the H200 suite's BERT and DistilBERT
encoders every attention call got no mask eager and a ``(batch, 1, seq, seq)`` boolean one
under capture, and the graph ran SDPA's math path, 0.8 and 7 ms more GPU work a step
(docs/diagnose.md; ``tests/diagnose/test_graph_truths.py``). The trace shows the calls, not the
library.
"""

from __future__ import annotations

import re

import numpy as np

from aiprof.trace import Trace

SDPA_OP = re.compile(r"^aten::scaled_dot_product_attention$")
MASK_ARG, CAUSAL_ARG = 3, 5
"""Positions of ``attn_mask`` and ``is_causal`` among ``scaled_dot_product_attention``'s
arguments (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa), as the
profiler records their shapes and concrete values (``record_shapes``)."""


def sdpa_rows(trace: Trace) -> np.ndarray:
    """The CPU op rows of ``aten::scaled_dot_product_attention``."""
    rows: np.ndarray = np.flatnonzero(trace.strings.mask(trace.cpu_ops.name_id, SDPA_OP))
    return rows


def causal(trace: Trace, row: int) -> bool | None:
    """Whether the call was causal; None where its value was not recorded."""
    values = trace.json_value(int(trace.cpu_ops.concrete_inputs_id[row]))
    flag = values[CAUSAL_ARG] if isinstance(values, list) and len(values) > CAUSAL_ARG else None
    return {"True": True, "False": False}.get(flag) if isinstance(flag, str) else None


def without_mask(trace: Trace, row: int) -> bool:
    """Whether the call's ``attn_mask`` was None (recorded as an empty shape)."""
    dims = trace.json_value(int(trace.cpu_ops.input_dims_id[row]))
    return isinstance(dims, list) and len(dims) > MASK_ARG and dims[MASK_ARG] == []


def unmasked_calls(trace: Trace) -> int:
    """SDPA calls inside the steps whose ``attn_mask`` is None and that are not causal (0 where
    shapes were not recorded)."""
    steps = trace.steps
    if len(steps.cpu_start_us) == 0:
        return 0
    rows = sdpa_rows(trace)
    at = trace.cpu_ops.ts_us[rows]
    inside = rows[(at >= steps.cpu_start_us[0]) & (at <= steps.cpu_end_us[-1])]
    return sum(without_mask(trace, r) and causal(trace, r) is not True for r in inside.tolist())
