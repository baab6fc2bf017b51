"""What channels_last does to EfficientNet-B0's depthwise convolutions and BatchNorms on one
H200 (scripts/h200/depthwise_layouts.py, 2026-12-01): the numbers docs/diagnose.md quotes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "diagnose" / "h200_depthwise_layouts.json"


def _rows(kind: str) -> list[dict[str, Any]]:
    doc = json.loads(DATA.read_text())
    assert doc["device"] == "NVIDIA H200" and doc["batch"] == 64
    return [r for r in doc["rows"] if str(r["shape"]).startswith(kind + " ")]


def _totals_ms(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(NCHW, channels_last) summed over the shapes, to the docs' 0.01 ms."""
    return (round(sum(float(r["nchw_ms"]) for r in rows), 2),
            round(sum(float(r["channels_last_ms"]) for r in rows), 2))


def test_channels_last_depthwise_runs_cudnn_and_is_faster_at_11_of_12_shapes() -> None:
    rows = _rows("dw")
    assert len(rows) == 12 and _totals_ms(rows) == (9.51, 3.82)
    assert sum(float(r["channels_last_ms"]) < float(r["nchw_ms"]) for r in rows) == 11
    for r in rows:
        kernels = r["kernels"]
        assert any("conv_depthwise2d" in k for k in kernels["nchw"])
        assert not any("conv_depthwise2d" in k for k in kernels["channels_last"])
        assert any("nhwc" in k for k in kernels["channels_last"])


def test_channels_last_batch_norm_is_faster_in_total() -> None:
    rows = _rows("bn")
    assert len(rows) == 7 and _totals_ms(rows) == (6.46, 2.99)
