"""GIVEN a real torch.profiler session on CPU WHEN the op view reads its exported trace THEN
every op's count, total and self CPU time equal ``key_averages()`` of the same session; the
kernel view's tensor-core families and the CLI's JSON hold on hand-built traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from views_synth import Builder

from aiprof import load_trace
from aiprof.analysis.kernel_view import kernel_view, tensor_core_kernel
from aiprof.analysis.ops import op_view
from aiprof.cli.main import main


def _profile(tmp_path: Path, record_shapes: bool) -> tuple[object, Path]:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(8 * 14 * 14, 10),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = [torch.randn(4, 3, 16, 16), torch.randn(2, 3, 16, 16)]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes) as prof:
        for x in inputs:
            with record_function("train_step"):
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return prof, path


def test_op_view_equals_key_averages(tmp_path: Path) -> None:
    prof, path = _profile(tmp_path, record_shapes=False)
    ours = {r.name: r for r in op_view(load_trace(path)).rows}
    theirs = prof.key_averages()  # type: ignore[attr-defined]
    assert len(theirs) > 20
    for event in theirs:
        row = ours[event.key]
        assert row.count == event.count, event.key
        # the trace keeps ns digits (3 decimals of µs): equal to a nanosecond per event
        slack = 2e-3 * event.count + 1e-6 * event.cpu_time_total
        assert row.total_cpu_us == pytest.approx(event.cpu_time_total, abs=slack), event.key
        assert row.self_cpu_us == pytest.approx(event.self_cpu_time_total, abs=slack), event.key
    assert set(ours) == {e.key for e in theirs}


def test_op_view_by_shape_equals_key_averages_by_shape(tmp_path: Path) -> None:
    prof, path = _profile(tmp_path, record_shapes=True)
    view = op_view(load_trace(path), by_shape=True)
    ours = {(r.name, json.dumps(json.loads(r.input_shapes)) if r.input_shapes else "[]"): r
            for r in view.rows}
    grouped = prof.key_averages(group_by_input_shape=True)  # type: ignore[attr-defined]
    for event in grouped:
        key = (event.key, json.dumps(event.input_shapes))
        if key not in ours:  # record_function ranges carry no shapes in the trace
            key = (event.key, "[]")
        row = ours[key]
        assert row.count == event.count, key
        slack = 2e-3 * event.count + 1e-6 * event.cpu_time_total
        assert row.self_cpu_us == pytest.approx(event.self_cpu_time_total, abs=slack), key


def test_gpu_time_is_attributed_to_the_launching_op_and_its_ancestors(tmp_path: Path) -> None:
    b = Builder()
    b.step(1, 0, 100)
    outer = b.op("aten::linear", 10, 50)
    inner = b.op("aten::addmm", 12, 30)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 15, 20, 40, external=inner)
    b.kernel("vectorized_elementwise_kernel", 45, 60, 5, external=outer)
    rows = {r.name: r for r in op_view(load_trace(b.write(tmp_path / "t.json"))).rows}
    assert (rows["aten::addmm"].self_gpu_us, rows["aten::addmm"].total_gpu_us) == (40, 40)
    assert (rows["aten::linear"].self_gpu_us, rows["aten::linear"].total_gpu_us) == (5, 45)
    # self CPU: linear 50 - addmm 30 - its own launch 2 = 18; addmm 30 - launch 2 = 28
    assert rows["aten::linear"].self_cpu_us == 18 and rows["aten::addmm"].self_cpu_us == 28
    assert rows["ProfilerStep#1"].total_gpu_us == 45


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16", True),
        ("ampere_sgemm_128x64_nn", False),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8", False),
        ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4", True),
        ("void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<c10::Half>>", False),
        ("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, cutlass::bfloat16_t>>", True),
        ("volta_h884gemm_64x64_ldg8_nn", True),
        ("implicit_convolve_sgemm<float, float, 128, 5, 5>", False),
    ],
)
def test_tensor_core_families(name: str, expected: bool) -> None:
    assert tensor_core_kernel(name) is expected


def test_kernel_view_shares_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = Builder()
    b.step(1, 0, 200)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 5, 10, 60)
    b.kernel("ampere_sgemm_128x64_nn", 7, 70, 20)
    b.kernel("vectorized_elementwise_kernel", 9, 90, 20)
    path = b.write(tmp_path / "k.json")
    view = kernel_view(load_trace(path))
    assert view.tensor_core_pct == pytest.approx(60.0)
    assert view.tensor_core_pct_of_math == pytest.approx(75.0)
    assert main(["ops", "--kernels", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "aiprof.kernels/1"
    first = doc["ranks"][0]["kernels"][0]
    assert first["tensor_core"] is True and first["total_us"] == 60
    assert main(["ops", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "aiprof.ops/1"
    pytest.importorskip("pandas")
    assert view.to_pandas()["tensor_core"].tolist() == [True, False, False]


def test_op_view_groups_by_table_and_by_sort_alike(public_traces: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The dense table and the sort give the same rows, and each row sums its spans' times in
    span order (as ``op_spans`` lists them)."""
    from collections import defaultdict

    from tests.conftest import require

    from aiprof.analysis import groups, ops

    trace = load_trace(require(public_traces / "df_index_resolver" / "df_index_resolver.json.gz"))
    for by_shape in (False, True):
        dense = ops.op_view(trace, by_shape=by_shape).rows
        with monkeypatch.context() as patch:
            patch.setattr(groups, "DENSE_KEYS_PER_SPAN", -10**12)  # always the sort
            assert ops.op_view(trace, by_shape=by_shape).rows == dense
        spans = ops.op_spans(trace)
        totals: dict[tuple[int, int, int], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
        for name, kind, shape, cpu, self_cpu in zip(
                spans.name_id.tolist(), spans.kind.tolist(), spans.shapes_id.tolist(),
                spans.total_cpu_us.tolist(), spans.self_cpu_us.tolist(), strict=True):
            row = totals[(name, kind, shape if by_shape else -1)]
            row[0] += 1
            row[1] += cpu
            row[2] += self_cpu
        assert len(dense) == len(totals) > 20
        by_key = {(r.name, r.kind, r.input_shapes): r for r in dense}
        for (name, kind, shape), (count, cpu, self_cpu) in totals.items():
            text = trace.json_texts[shape] if shape >= 0 else None
            r = by_key[(trace.name(name), ops.KINDS[kind], text)]
            assert (r.count, r.total_cpu_us, r.self_cpu_us) == (count, cpu, self_cpu)
