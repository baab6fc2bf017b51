"""How many Triton kernels a compiled step launches for what its eager step ran as memory-bound
kernels (``diagnose/compiled_kernels.py``), against the H200's compiled steps."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from tests.support.kineto_synth import TraceBuilder

from aiprof.diagnose import compiled_kernels as ck
from aiprof.diagnose.compiled_host import TRITON_KERNEL
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.trace import load_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "diagnose"
MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>"
ADD = "void at::native::vectorized_elementwise_kernel<2, at::native::CUDAFunctor_add<long>>"
SUM = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func>>"
F32 = "float"


def test_a_run_takes_a_kernel_per_element_count_and_per_reduction(tmp_path: Path) -> None:
    """GIVEN a run of four memory-bound kernels: two pointwise ops over 1M elements, a 0-d
    counter's increment (BatchNorm's ``num_batches_tracked``) and a sum over the 1M, WHEN its
    parts are counted, THEN there are three (two element counts, one reduction); without
    recorded shapes there is no count."""
    b = TraceBuilder()
    n = 1 << 20
    ops = [("aten::mul", MUL, {"Input Dims": [[n], [n]], "Input type": [F32, F32]}),
           ("aten::mul", MUL, {"Input Dims": [[n], []], "Input type": [F32, "Scalar"]}),
           ("aten::add_", ADD, {"Input Dims": [[], []], "Input type": ["long int", "Scalar"]}),
           ("aten::sum", SUM, {"Input Dims": [[n], []], "Input type": [F32, "Scalar"]})]
    for k, (op, kernel, args) in enumerate(ops):
        ext = b.cpu_op(op, 10.0 * k, 8.0, **args)
        b.kernel(kernel, 10.0 * k + 1, 100.0 + 10.0 * k, 5.0, external=ext)
    bare = TraceBuilder()
    for k in range(4):
        bare.kernel(MUL, 10.0 * k + 1, 100.0 + 10.0 * k, 5.0)
    for builder in (b, bare):
        builder.step(0, 0.0, 200.0)
    trace = load_trace(b.write(tmp_path / "t.json.gz"))
    rows = np.arange(len(trace.gpu_ops.name_id), dtype=np.int64)
    assert ck.part_count(trace, rows) == 3
    assert ck.part_count(trace, rows[:2]) == 1  # one element count, no reduction
    assert ck.part_count(trace, rows[3:]) == 2  # a reduction: its result is another kernel's
    unshaped = load_trace(bare.write(tmp_path / "bare.json.gz"))
    assert ck.part_count(unshaped, np.arange(4, dtype=np.int64)) is None
    per_row = ck.kernels_per_row(trace, rows[:1], {int(rows[0]): rows})
    assert per_row[0] == pytest.approx(3 * ck.TRAINING_KERNELS_PER_PART)


@pytest.mark.slow
def test_a_compiled_training_step_launches_about_one_kernel_per_part() -> None:
    """GIVEN the seven compiled training steps that compiled the whole step (three folders),
    WHEN their Triton kernels are counted against the parts of the memory-bound kernels the
    model keeps of the eager step, THEN the median is ``TRAINING_KERNELS_PER_PART``, each within
    0.8-1.6 (kernels per kept kernel: 1.56-4.70)."""
    from aiprof.diagnose.compiled import kept_parts_per_step
    from aiprof.evaluation import load_suite

    suite = {w.name: w for w in load_suite(DATA / "counterfactual")}
    ratios = []
    for folder in ("compiled", "compiled_second", "compiled_third"):
        doc = json.loads((DATA / folder / "compiled_steps.json").read_text())
        for entry in doc["workloads"]:
            name = entry["workload"]
            if ("trace" not in entry or not name.endswith("_train") or name.startswith("rl_")
                    or name not in suite):
                continue
            path = suite[name].trace
            eager = Context(load_trace(path if path.is_file()
                                       else next(path.glob("*.trace.json.gz"))),
                            DiagnoseOptions())
            compiled = load_trace(DATA / folder / entry["trace"])
            k = compiled.kernels
            triton = np.count_nonzero(compiled.strings.mask(k.name_id, TRITON_KERNEL)
                                      & (k.launch_row >= 0)) / max(len(compiled.steps), 1)
            ratios.append(triton / kept_parts_per_step(eager))
    assert len(ratios) == 7
    assert all(0.8 < r < 1.6 for r in ratios), ratios
    assert statistics.median(ratios) == pytest.approx(ck.TRAINING_KERNELS_PER_PART, abs=0.01)
