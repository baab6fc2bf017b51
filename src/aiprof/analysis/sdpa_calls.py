"""``F.scaled_dot_product_attention`` calls that get no mask and are not causal.

Such a call can take another path inside a CUDA graph: a library that decides whether a mask
is needed from the data only when it is not tracing builds one while a stream captures, and
SDPA with that mask may run a slower backend. transformers does (its ``is_tracing`` counts a
capturing stream): on the H200 suite's BERT and DistilBERT encoders every attention call got
no mask eager and a ``(batch, 1, seq, seq)`` boolean one under capture, and the graph ran
SDPA's math path, 0.8 and 7 ms more GPU work a step (docs/diagnose.md;
``tests/diagnose/test_graph_truths.py``). The trace shows the calls, not the library.
"""

from __future__ import annotations

import numpy as np

from aiprof.trace import Trace

SDPA_OP = "aten::scaled_dot_product_attention"
MASK_ARG, CAUSAL_ARG = 3, 5
"""``attn_mask`` and ``is_causal`` in ``scaled_dot_product_attention(query, key, value,
attn_mask, dropout_p, is_causal, scale, enable_gqa)``."""


def unmasked_calls(trace: Trace) -> int:
    """SDPA calls inside the steps whose ``attn_mask`` is None and ``is_causal`` False (read
    off the recorded shapes: 0 where shapes were not recorded)."""
    ops, steps = trace.cpu_ops, trace.steps
    if len(ops.name_id) == 0 or len(steps.cpu_start_us) == 0:
        return 0
    rows = np.flatnonzero(trace.strings.mask(ops.name_id, f"^{SDPA_OP}$"))
    inside = (ops.ts_us[rows] >= steps.cpu_start_us[0]) & (ops.ts_us[rows] <= steps.cpu_end_us[-1])
    count = 0
    for row in rows[inside].tolist():
        dims = (trace.json_value(int(ops.input_dims_id[row]))
                if ops.input_dims_id[row] >= 0 else None)
        values = (trace.json_value(int(ops.concrete_inputs_id[row]))
                  if ops.concrete_inputs_id[row] >= 0 else None)
        if not isinstance(dims, list) or len(dims) <= MASK_ARG or dims[MASK_ARG] != []:
            continue
        causal = values[CAUSAL_ARG] if isinstance(values, list) and len(values) > CAUSAL_ARG else ""
        count += causal != "True"
    return count
