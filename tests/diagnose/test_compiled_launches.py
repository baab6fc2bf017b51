"""What the compiled code still launches of an eager step (``diagnose/compiled.py``'s clone
copies, ``compiled_launches``' helper launches and SDPA's math decomposition), checked against
the H200's compiled steps of the same workloads."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from aiprof.analysis.gpu_window import gpu_window
from aiprof.diagnose import compiled_launches as cl
from aiprof.diagnose.compiled import DEVICE_COPY, clone_copies
from aiprof.diagnose.compiled_host import BACKWARD_REGION, FORWARD_REGION
from aiprof.trace import Trace, load_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "diagnose"
EAGER = DATA / "counterfactual"
MEMSET = re.compile(r"^Memset")
BMM = re.compile(r"^aten::bmm$")
HELPER = re.compile(r"^Memset|GammaBetaBackward")
LAYOUT_COPY = re.compile(r"^triton_.*(clone.*transpose|transpose.*clone)")


def eager(name: str) -> Trace:
    return load_trace(EAGER / f"{name}.torch.trace.json.gz")


def compiled(folder: str, name: str) -> Trace:
    return load_trace(DATA / folder / f"{name}.compiled.trace.json.gz")


def per_step(trace: Trace, count: int) -> float:
    return count / max(len(trace.steps), 1)


def step_rows(trace: Trace) -> np.ndarray:
    return np.asarray(gpu_window(trace).rows, dtype=np.int64)


def test_inductor_drops_the_copies_clone_made() -> None:
    """GIVEN hand_attention's eager step (``masked_fill`` out of place: a clone, then the
    in-place fill) and its compiled step, WHEN the device copies that ``aten::clone`` made are
    found, THEN the eager step has at least 8 a step, not every device copy (a ``pow``
    backward's copy is no clone's), and the compiled step made none and copies under 0.05 ms
    a step."""
    trace = eager("hand_attention_bf16_train")
    rows = step_rows(trace)
    clones = clone_copies(trace, rows)
    copies = rows[trace.strings.mask(trace.gpu_ops.name_id[rows], DEVICE_COPY)]
    assert per_step(trace, len(clones)) >= 8
    assert 0 < len(clones) < len(copies)
    assert float(trace.gpu_ops.dur_us[clones].sum()) / max(len(trace.steps), 1) > 900.0
    done = compiled("compiled_fourth", "hand_attention_bf16_train")
    crows = step_rows(done)
    assert len(clone_copies(done, crows)) == 0
    left = crows[done.strings.mask(done.gpu_ops.name_id[crows], DEVICE_COPY)]
    assert float(done.gpu_ops.dur_us[left].sum()) / max(len(done.steps), 1) < 50.0


def test_the_memsets_of_generated_reductions_are_not_launched_by_compiled_code() -> None:
    """GIVEN bert_small's eager step (its bias gradients are ``aten::sum``: a ``Memset`` then a
    ``reduce_kernel``) and its compiled step, WHEN the helper launches of generated ops are
    found, THEN the eager step has at least 20 memsets among them (24 of the 33 a step; the rest
    layer-norm backwards' weight-gradient kernels), every one of an op that also launched a
    generated kernel, and the compiled step launches at most one memset a step."""
    trace = eager("bert_small_fp32_train")
    rows = step_rows(trace)
    helper = cl.helper_kernel(trace, rows)
    names = trace.gpu_ops.name_id[rows[helper]]
    assert per_step(trace, int(trace.strings.mask(names, MEMSET).sum())) >= 20
    assert trace.strings.mask(names, HELPER).all()
    generated_ops = set(trace.gpu_ops.op_row[rows[cl.generated_kernel(trace, rows)]].tolist())
    assert set(trace.gpu_ops.op_row[rows[helper]].tolist()) <= generated_ops
    done = compiled("compiled", "bert_small_fp32_train")
    crows = step_rows(done)
    assert per_step(done, int(done.strings.mask(done.gpu_ops.name_id[crows], MEMSET).sum())) <= 1


@pytest.mark.parametrize(("folder", "name"), [("compiled", "bert_small_fp32_train"),
                                              ("compiled", "vit_small_fp32_train"),
                                              ("compiled_second", "distilbert_sync_train")])
def test_a_compiled_training_step_runs_sdpa_as_its_math(folder: str, name: str) -> None:
    """GIVEN a training step whose eager non-causal SDPA ran fused kernels and its compiled
    step, WHEN their ops are counted, THEN the model takes the math decomposition for it, and
    the compiled step has no fused attention op left, ``MATH_ATTENTION_FORWARD_GEMMS +
    MATH_ATTENTION_BACKWARD_GEMMS`` ``aten::bmm`` per eager forward attention op and
    ``MATH_ATTENTION_GENERATED_KERNELS - 1`` layout copies (``triton_*clone*transpose*``) per
    attention op each way."""
    trace = eager(name)
    assert cl.math_attention(trace)
    forward = int(trace.strings.mask(trace.cpu_ops.name_id, cl.FUSED_ATTENTION_FORWARD).sum())
    backward = int(trace.strings.mask(trace.cpu_ops.name_id, cl.FUSED_ATTENTION_BACKWARD).sum())
    assert forward > 0 and backward == forward
    done = compiled(folder, name)
    ids = done.cpu_ops.name_id
    assert not done.strings.mask(ids, cl.FUSED_ATTENTION_FORWARD).any()
    assert not done.strings.mask(ids, cl.FUSED_ATTENTION_BACKWARD).any()
    gemms = cl.MATH_ATTENTION_FORWARD_GEMMS + cl.MATH_ATTENTION_BACKWARD_GEMMS
    assert per_step(done, int(done.strings.mask(ids, BMM).sum())) == gemms * per_step(trace,
                                                                                       forward)
    inside = np.zeros(len(done.kernels), dtype=bool)
    for lo, hi in zip(*graph_calls(done), strict=True):
        at = np.where(done.kernels.launch_row >= 0,
                      done.runtime.ts_us[np.maximum(done.kernels.launch_row, 0)], np.nan)
        inside |= (at >= lo) & (at <= hi)
    copies = done.strings.mask(done.kernels.name_id, LAYOUT_COPY) & inside
    assert per_step(done, int(copies.sum())) == 2 * (cl.MATH_ATTENTION_GENERATED_KERNELS - 1) \
        * per_step(trace, forward)


def graph_calls(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The spans of the compiled graphs' calls (forward regions and backward nodes)."""
    ops = trace.cpu_ops
    rows = np.flatnonzero(trace.strings.mask(ops.name_id, FORWARD_REGION)
                          | trace.strings.mask(ops.name_id, BACKWARD_REGION))
    return ops.ts_us[rows], ops.ts_us[rows] + ops.dur_us[rows]


def test_a_causal_sdpa_keeps_its_fused_kernels_in_the_model() -> None:
    """GIVEN gpt2_vocab's and llama_fp32's training steps (causal SDPA: no compiled step of a
    causal training step is recorded), THEN the model keeps their attention's one call each."""
    for name in ("gpt2_vocab_bf16_train", "llama_fp32_empty_cache_train"):
        assert not cl.math_attention(eager(name))


def test_a_compiled_inference_step_keeps_its_fused_attention() -> None:
    """GIVEN llama_tiny's compiled inference step, THEN its cuDNN attention stays (the math
    decomposition is a training step's; the model leaves inference attention as it ran)."""
    done = compiled("compiled_second", "llama_tiny_b2_infer")
    assert done.strings.mask(done.cpu_ops.name_id, cl.FUSED_ATTENTION_FORWARD).any()
