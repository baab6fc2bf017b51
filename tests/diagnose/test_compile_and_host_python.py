"""Issue 15's models of what torch.compile removes (``diagnose/compiled.py``) and of host
Python outside any op (``analysis/host_work.untracked_gaps``), each on a trace built here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.kineto_synth import TraceBuilder

from aiprof.analysis.kernel_kinds import GEMM_OR_CONV, TENSOR_CORE
from aiprof.diagnose import diagnose
from aiprof.diagnose.compiled_host import host_costs
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.rules import unfused_elementwise
from aiprof.trace import load_trace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>"


def test_cublas_nvjet_kernels_are_tensor_core_gemms() -> None:
    name = "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT"  # the H200 recordings' bf16 GEMMs
    assert GEMM_OR_CONV.search(name) and TENSOR_CORE.search(name)


def tokenized_steps(path: Path, upload: bool) -> Path:
    """Each step: 1.5 ms of Python with no op (a tokenizer), then (``upload``) the ids copied
    to the GPU, then 20 launches 10 µs apart of 100 µs GEMMs (GPU-bound after the Python)."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start = t
        t += 1500.0  # Python outside any op: nothing recorded
        if upload:
            b.memcpy("Memcpy HtoD (Pageable -> Device)", t, 8.0, t + 4.0, 2.0, 32768)
        t += 10.0
        gpu = t + 6.0
        for _ in range(20):
            b.cpu_op("aten::mm", t, 8.0)
            b.kernel(GEMM, t + 1, gpu, 100.0, launch_dur=4.0)
            gpu += 101.0
            t += 10.0
        b.runtime("cudaStreamSynchronize", t, gpu - t + 2)
        b.step(s, start, gpu + 3 - start)
        t = gpu + 4
    return b.write(path)


def test_python_that_makes_the_uploaded_data_is_host_busy(tmp_path: Path) -> None:
    """GIVEN 1.5 ms per step of Python outside any op before the batch's upload, WHEN it is
    diagnosed, THEN host_busy names it and gains about its share of the 3.5 ms step, and
    cpu_bound does not count it as launch overhead (a CUDA graph would not remove it)."""
    result = diagnose(tokenized_steps(tmp_path / "t.json.gz", upload=True),
                      DiagnoseOptions(profiler_overhead_us=0.0))
    busy = next(f for f in result.findings if f.category == "host_busy")
    assert busy.evidence["host_ops"][0]["name"] == "(Python outside any op)"
    assert busy.evidence["host_ops"][0]["ms_per_step"] == pytest.approx(1.5, abs=0.05)
    assert busy.estimated_gain_pct == pytest.approx(100 * 1.5 / 3.54, abs=4.0)
    assert result.findings[0].category == "host_busy"
    assert all(f.estimated_gain_pct < 5.0 for f in result.findings if f.category == "cpu_bound")


def test_python_that_uploads_nothing_is_not_host_busy(tmp_path: Path) -> None:
    """The same Python followed by launches only (an optimizer's or a loop's bookkeeping):
    launch overhead, not host work."""
    result = diagnose(tokenized_steps(tmp_path / "t.json.gz", upload=False),
                      DiagnoseOptions(profiler_overhead_us=0.0))
    assert "host_busy" not in {f.category for f in result.findings}


def eager_block(path: Path, python_us: float, elementwise: int, lone: bool = False) -> Path:
    """Steps of 10 blocks: a GEMM op, ``python_us`` of module Python, then ``elementwise``
    elementwise ops in a row (each 30 µs of dispatch, a 20 µs kernel); with ``lone`` a single
    elementwise op between two GEMMs instead."""
    b = TraceBuilder()
    t = 0.0
    gpu = 10.0
    for s in range(3):
        start = t
        for _ in range(10):
            kernels = [GEMM] + ([ADD] if lone else [ADD, MUL] * (elementwise // 2))
            for k, name in enumerate(kernels):
                if k == 1:
                    t += python_us
                b.cpu_op("aten::mm" if name == GEMM else "aten::add", t, 30.0)
                gpu = max(gpu, t + 12.0)
                dur = 40.0 if name == GEMM else 20.0
                b.kernel(name, t + 20.0, gpu, dur, launch_dur=5.0)
                gpu += dur + 1.0
                t += 31.0
        b.step(s, start, max(t, gpu) - start + 2.0)
        t = max(t, gpu) + 3.0
    return b.write(path)


def compile_gain(path: Path) -> tuple[float, Context]:
    ctx = Context(load_trace(path), DiagnoseOptions(profiler_overhead_us=0.0))
    change = unfused_elementwise.change(ctx)
    return (ctx.gain_pct(change) if change is not None else 0.0), ctx


def test_compile_replaces_the_eager_dispatch_by_the_generated_codes_cost(
    tmp_path: Path,
) -> None:
    """GIVEN a host-bound inference step: each block is 31 µs per op plus 100 µs of module
    Python, launch calls of 5 µs; WHEN it is replayed under compile, THEN the four elementwise
    kernels are one generated kernel, and the host's time per block is one generated launch
    and one extern op (``compiled_host``'s costs in units of the trace's 5 µs launch call), per
    step one call of the graph: the Python and the eager dispatch are gone."""
    gain, ctx = compile_gain(eager_block(tmp_path / "t.json.gz", 100.0, 4))
    costs = host_costs(ctx.trace, 5.0)
    block_eager = 5 * 31.0 + 100.0
    block_compiled = costs.generated_launch_us + costs.extern_op_us
    compiled = 10 * block_compiled + costs.inference_call_us
    assert gain == pytest.approx(100 * (1 - compiled / (10 * block_eager)), abs=4.0)
    fused = unfused_elementwise.change(ctx)
    assert fused is not None and not fused.launch_work_scale < 1.0
    assert sum(1 for d in fused.gpu_dur_us.values() if d == 0.0) == 3 * 10 * 3
    assert len(fused.added_cpu_us) == 3 * 10 * 2  # per block: the GEMM and the fused kernel


def test_compile_gains_nothing_where_the_eager_ops_were_cheaper_than_compiled_launches(
    tmp_path: Path,
) -> None:
    """GIVEN a host-bound step whose ops dispatch in 31 µs with no Python between them, a GEMM
    and a lone elementwise op a block (nothing to fuse but the runs across blocks: none),
    WHEN compile is replayed, THEN each kernel still costs a launch of the generated code and
    each step a graph call: no gain (the false positives of ``rl_policy_rollout`` and
    ``resnet18_b4_train``, where compile measured -38.8% and -8.1%)."""
    b = TraceBuilder()
    t, gpu = 0.0, 10.0
    for s in range(3):
        start = t
        for k in range(30):
            name = GEMM if k % 3 == 0 else (ADD if k % 3 == 1 else MUL)
            b.cpu_op("aten::mm" if name == GEMM else "aten::add", t, 6.0)
            gpu = max(gpu, t + 12.0)
            b.kernel(name, t + 1.0, gpu, 5.0, launch_dur=5.0)
            gpu += 6.0
            t += 8.0
        b.step(s, start, max(t, gpu) - start + 2.0)
        t = max(t, gpu) + 3.0
    gain, ctx = compile_gain(b.write(tmp_path / "t.json.gz"))
    assert gain == 0.0
    found = {f.category for f in diagnose(ctx.trace, ctx.options).findings}
    assert "unfused_elementwise" not in found


def test_a_lone_elementwise_kernel_between_gemms_is_not_fused(tmp_path: Path) -> None:
    """Default-mode Inductor does not fuse into cuBLAS epilogues: a lone kernel between two
    GEMMs stays, and with nothing to fuse there is no fusion finding (the module Python alone
    is cpu_bound's)."""
    gain, ctx = compile_gain(eager_block(tmp_path / "t.json.gz", 100.0, 0, lone=True))
    assert unfused_elementwise.change(ctx) is None and gain == 0.0
    found = {f.category for f in diagnose(ctx.trace, ctx.options).findings}
    assert "unfused_elementwise" not in found and "cpu_bound" in found


ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::Adam>"


def model_then_optimizer(path: Path) -> Path:
    """Steps of a GEMM, two elementwise kernels of the model, then ``Optimizer.step`` with
    three foreach kernels in a row (eager under ``torch.compile(model)``), queued back to
    back and synchronized at the end."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start, gpu = t, t + 9.0
        for k, name in enumerate([GEMM, ADD, MUL, ADAM, ADAM, ADAM]):
            if k == 3:
                b.annotation("Optimizer.step#AdamW.step", t - 0.5, 3 * 8.0)
            b.kernel(name, t + 1.0, gpu + 1.0, 30.0, external=b.cpu_op("aten::op", t, 6.0))
            gpu += 31.0
            t += 8.0
        b.runtime("cudaDeviceSynchronize", t, gpu - t + 2.0)
        b.step(s, start, gpu - start + 5.0)
        t = gpu + 6.0
    return b.write(path)


def test_the_eager_optimizers_foreach_kernels_are_not_fused(tmp_path: Path) -> None:
    """GIVEN a run of memory-bound kernels that goes on into the optimizer's foreach kernels,
    WHEN the step is replayed under torch.compile(model), THEN only the model's part of the run
    is one kernel: the optimizer is not compiled, its three kernels keep their time."""
    _, ctx = compile_gain(model_then_optimizer(tmp_path / "t.json.gz"))
    fused = unfused_elementwise.change(ctx)
    assert fused is not None
    names = {ctx.trace.name(int(ctx.trace.gpu_ops.name_id[r])) for r in fused.gpu_dur_us}
    assert names == {MUL} and len(fused.gpu_dur_us) == 3  # the ADD kept (the first longest)


GENERIC_ADD = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast"
               "<at::native::CUDAFunctor_add<c10::BFloat16>>>")
VECTOR_RELU = ("void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous "
               "namespace)::launch_clamp_scalar>")


def test_a_kept_kernel_aten_ran_without_vector_loads_takes_the_vectorized_rate(
    tmp_path: Path,
) -> None:
    """GIVEN a bias add over a 128 MiB bf16 activation that ATen ran with its generic
    (offset-calculator) kernel in 300 µs, then a ReLU over the same tensor in the vectorized
    kernel in 100 µs, WHEN the pair is fused, THEN the fused kernel moves the add's bytes at
    the ReLU's rate (about 100 µs), not at the add's: the generated kernel loads vectors."""
    n = 64 * 1024 * 1024  # bf16 elements: 128 MiB a tensor, above the H200's 60 MiB of L2
    x = {"Input Dims": [[n], [n]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    relu = {"Input Dims": [[n], []], "Input type": ["c10::BFloat16", "Scalar"]}
    b = TraceBuilder()
    b.synced_steps([(GEMM, "aten::mm", {}, 50.0), (GENERIC_ADD, "aten::add_", x, 300.0),
                    (VECTOR_RELU, "aten::clamp_min", relu, 100.0), (GEMM, "aten::mm", {}, 50.0)])
    _, ctx = compile_gain(b.write(tmp_path / "t.json.gz"))
    fused = unfused_elementwise.change(ctx)
    assert fused is not None
    gpu = ctx.trace.gpu_ops
    kept = [d for r, d in fused.gpu_dur_us.items() if d > 0]
    adds = [r for r in fused.gpu_dur_us if ctx.trace.name(int(gpu.name_id[r])) == GENERIC_ADD]
    assert len(kept) == len(adds) == 3
    relu_rate = 2 * n * 2 / 100.0  # bytes per µs of the ReLU: read and write n bf16
    add_bytes = 3 * n * 2
    assert kept == pytest.approx([add_bytes / relu_rate] * 3, rel=0.05)
