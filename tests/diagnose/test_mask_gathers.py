"""A boolean-mask gather that synchronized goes with its backward node under host_sync's fix
(``analysis/mask_gathers.py``): the pairing by sequence number on a real torch.profiler trace,
and what the fix removes on the suite's H200 records of deeplabv3's ``x[mask]`` loss."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from aiprof.analysis.mask_gathers import GATHER_OP, backward_nodes, mask_gathers
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.rules import host_sync
from aiprof.trace import Trace, load_trace

DATA = Path(__file__).parents[1] / "data" / "diagnose"
RECORDINGS = ("counterfactual", "counterfactual_1202", "counterfactual_third")


def _names(trace: Trace, rows: np.ndarray) -> Counter[str]:
    return Counter(trace.name(int(trace.cpu_ops.name_id[r])) for r in rows)


def test_the_gather_of_a_tensor_needing_grad_pairs_with_its_index_backward(
        tmp_path: Path) -> None:
    """GIVEN a CPU step with two boolean-mask gathers, one of a tensor that needs a gradient
    and one of a target that does not (as a masked loss has), WHEN their backward nodes are
    paired by sequence number, THEN only the first gets one, an ``IndexBackward0`` run after
    it: the target's gather carries the next node's number (the loss's
    ``LogSoftmaxBackward0``), which must not be taken for its own."""
    from torch.profiler import ProfilerActivity, profile

    logits = torch.randn(4096, 21, requires_grad=True)
    target = torch.randint(0, 21, (4096,))
    target[:512] = 255
    path = tmp_path / "trace.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        valid = target != 255
        torch.nn.functional.cross_entropy(logits[valid], target[valid]).backward()
    prof.export_chrome_trace(str(path))
    trace = load_trace(path)
    ops = trace.cpu_ops
    gathers = np.flatnonzero(trace.strings.mask(ops.name_id, GATHER_OP))
    assert len(gathers) == 2
    nodes = backward_nodes(trace, gathers)
    assert len(nodes) == 1
    assert trace.name(int(ops.name_id[nodes[0]])).endswith("IndexBackward0")
    first = gathers[np.argmin(ops.ts_us[gathers])]
    assert ops.sequence_number[nodes[0]] == ops.sequence_number[first]
    assert ops.ts_us[nodes[0]] >= ops.end_us[first]
    assert len(backward_nodes(trace, gathers[gathers != first])) == 0
    # the gathers are found among the ops around syncs only by name
    assert np.array_equal(mask_gathers(trace, np.append(gathers, -1)), np.sort(gathers))


@pytest.mark.parametrize("recording", RECORDINGS)
def test_deeplabs_masked_loss_goes_with_the_gathers_backward(recording: str) -> None:
    """GIVEN deeplabv3's H200 records, whose loss picks its pixels with ``x[mask]`` (two
    gathers a step, logits and target, and the logits' backward scatter, each calling
    ``nonzero``: a sync), WHEN host_sync's fix is built, THEN it removes both gathers and the
    one backward node, and with them the gather's kernel and the backward's
    ``indexing_backward_kernel`` but no kernel of the loss itself (its log-softmax), and the
    gain is above what unblocking the syncs alone gives."""
    record = DATA / recording / "deeplabv3_mnv3_mask_train.aiprof"
    ctx = Context(load_trace(next(record.glob("*.trace.json.gz"))), DiagnoseOptions())
    found = host_sync._fix(ctx)
    assert found is not None
    steps = len(ctx.trace.steps)
    assert _names(ctx.trace, found.gathers) == {"aten::index": 2 * steps}
    assert _names(ctx.trace, found.backward) == {
        "autograd::engine::evaluate_function: IndexBackward0": steps}
    zeroed = [r for r, d in found.change.gpu_dur_us.items() if d == 0.0]
    kernels = Counter(ctx.trace.name(int(ctx.trace.gpu_ops.name_id[r])) for r in zeroed)
    assert any("indexing_backward_kernel" in k for k in kernels)
    assert any("index_elementwise_kernel" in k for k in kernels)
    assert not any("softmax" in k for k in kernels)
    unblocked_only = replace(found.change, removed_cpu=(np.zeros(0), np.zeros(0)),
                             gpu_dur_us={})
    assert ctx.gain_pct(found.change) > ctx.gain_pct(unblocked_only) + 1.0
