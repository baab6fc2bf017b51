"""GIVEN models in NCHW/channels_last and aligned/misaligned linears WHEN linted THEN the layout
lint flags NCHW half-precision convs only, and the alignment lint flags dims off multiples of 8."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from aiprof.measure.tensor.model_analysis import analyze_model  # noqa: E402
from aiprof.tensor.alignment import lint_alignment  # noqa: E402
from aiprof.tensor.ceilings_model import ceilings_for_gpu  # noqa: E402
from aiprof.tensor.layout import lint_layout  # noqa: E402
from aiprof.tensor.opcall import OpCall, TensorMeta  # noqa: E402

from . import nets  # noqa: E402

H200 = ceilings_for_gpu("H200")


def _calls(model, inputs, backward=False):
    return [op.call for op in analyze_model(model, inputs, backward=backward).recorded]


def test_layout_flags_nchw_bf16_resnet_and_not_its_channels_last_twin() -> None:
    model = nets.resnet18().bfloat16()
    x = torch.randn(2, 3, 64, 64, dtype=torch.bfloat16)  # last stage 2x2: layouts differ
    nchw = lint_layout(_calls(model, (x,)), H200)
    convs = nchw.num_convs_checked
    assert convs == 20  # ResNet-18: stem + 16 block convs + 3 downsample convs
    flagged = [f for f in nchw.findings if f.kind == "nchw_half_conv"]
    assert len(flagged) == convs
    first = flagged[0]
    # conversion of input and output once each, read + write: 2·(x + out) bytes at 4.8 TB/s
    expected = 2 * (2 * 3 * 64 * 64 + 2 * 64 * 32 * 32) * 2
    assert first.converted_bytes == expected
    assert first.predicted_us == pytest.approx(expected / 4.8e12 * 1e6)
    twin = model.to(memory_format=torch.channels_last)
    x_cl = x.to(memory_format=torch.channels_last)
    nhwc = lint_layout(_calls(twin, (x_cl,)), H200)
    assert nhwc.num_convs_checked == convs
    assert [f for f in nhwc.findings if f.kind == "nchw_half_conv"] == []


def test_layout_ignores_fp32_convs() -> None:
    report = lint_layout(_calls(torch.nn.Conv2d(3, 8, 3), (torch.randn(1, 3, 8, 8),)))
    assert report.num_convs_checked == 1 and report.findings == ()


def test_permute_then_contiguous_is_a_strided_copy() -> None:
    x = torch.randn(4, 8, 16, 32)
    report = lint_layout(_calls(lambda t: t.permute(0, 2, 3, 1).contiguous(), (x,)))
    assert [f.kind for f in report.findings] == ["strided_copy"]
    assert report.findings[0].converted_bytes == 2 * x.numel() * 4
    assert lint_layout(_calls(lambda t: t.contiguous() + 1, (x,))).findings == ()


@pytest.mark.parametrize(
    ("features", "dtype", "flagged"),
    [
        (4095, torch.bfloat16, True),
        (4096, torch.bfloat16, False),
        (1022, torch.float32, True),
        (1024, torch.float32, False),
    ],
)
def test_alignment_of_linear_layers(features, dtype, flagged) -> None:
    layer = torch.nn.Linear(features, features).to(dtype)
    x = torch.randn(64, features, dtype=dtype)
    findings = lint_alignment(_calls(layer, (x,)), H200, check_pointers=False)
    dims = [f for f in findings if f.kind == "dimension"]
    assert bool(dims) == flagged
    if flagged:
        multiple = 8 if dtype == torch.bfloat16 else 4
        padded = -(-features // multiple) * multiple
        assert dims[0].misaligned == ("N", "K")
        assert dims[0].padded_dims == {"M": 64, "N": padded, "K": padded}
        assert dims[0].extra_flops_pct == pytest.approx(100 * ((padded / features) ** 2 - 1))
        assert dims[0].padded_roof_us >= dims[0].roof_us


def test_measured_time_bounds_the_gain_of_padding() -> None:
    call = OpCall(
        "mm", (TensorMeta((4096, 4095), "bfloat16"), TensorMeta((4095, 4096), "bfloat16"))
    )
    (finding,) = lint_alignment([call], H200, [500.0])
    assert finding.misaligned == ("K",)
    assert finding.max_gain_us == pytest.approx(500.0 - finding.padded_roof_us)


def test_pointer_alignment_of_large_operands() -> None:
    shape = (1024, 1024)
    good = TensorMeta(shape, "float16", data_ptr=0x7F0000000000)
    bad = TensorMeta(shape, "float16", data_ptr=0x7F0000000000 + 64)
    findings = lint_alignment([OpCall("mm", (bad, good))])
    assert [(f.kind, f.data_ptr_mod_256) for f in findings] == [("pointer", 64)]
    assert lint_alignment([OpCall("mm", (bad, good))], check_pointers=False) == ()
