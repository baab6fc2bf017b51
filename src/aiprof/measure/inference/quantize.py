"""INT8 quantization sensitivity per layer, by fake quantization (quantize then dequantize).

Weights: symmetric per-output-channel INT8, ``scale = max|w| / 127``; activations (layer inputs):
symmetric per-tensor INT8 with the range set at the 99.99th percentile of |x| on the calibration
batch, so values beyond it saturate. Both follow Nagel et al., "A White Paper on Neural Network
Quantization", arXiv:2106.08295, sections 2-3 (symmetric uniform quantization, per-channel
weights, percentile range setting). Error is reported as SQNR = 10·log10(Σy² / Σ(y − ŷ)²) dB
(uniform b-bit quantization of a full-scale signal gives about 6.02·b + 1.76 dB, i.e. ~50 dB at
8 bits) and as relative L2 error ‖y − ŷ‖ / ‖y‖. torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiprof.errors import InputError
from aiprof.measure.inference.bench import import_torch

QMAX = 127
ACTIVATION_PERCENTILE = 99.99


@dataclass(frozen=True, kw_only=True)
class LayerSensitivity:
    """How one Linear/Conv layer suffers from INT8."""

    name: str
    kind: str
    layer_sqnr_db: float
    layer_rel_error: float
    model_sqnr_db: float
    """SQNR of the model output when only this layer is quantized."""
    model_rel_error: float
    input_min: float
    input_max: float
    outlier_ratio: float
    """max|x| over the 99.99th percentile of |x|: how far the largest activation sits out."""
    saturation_pct: float
    """Share of input values clipped by the percentile range."""


@dataclass(frozen=True, kw_only=True)
class QuantizationReport:
    """Every layer, worst first, and which to keep in higher precision."""

    layers: tuple[LayerSensitivity, ...]
    keep_high_precision: tuple[str, ...]
    threshold_db: float
    all_layers_model_sqnr_db: float
    """Model-output SQNR with every layer quantized."""
    fp32_latency_us: float | None = None
    int8_latency_us: float | None = None
    int8_backend: str | None = None
    """What ran the INT8 model (``None``: no backend could run it; see ``int8_note``)."""
    int8_note: str = ""


def sqnr_db(reference: Any, approx: Any) -> float:
    """Signal-to-quantization-noise ratio in dB (inf when identical)."""
    torch = import_torch()
    signal = float(reference.double().pow(2).sum())
    noise = float((reference.double() - approx.double()).pow(2).sum())
    return float("inf") if noise == 0 else 10 * float(torch.log10(torch.tensor(signal / noise)))


def rel_error(reference: Any, approx: Any) -> float:
    """‖reference − approx‖ / ‖reference‖."""
    norm = float(reference.double().norm())
    return float((reference.double() - approx.double()).norm()) / norm if norm else 0.0


def fake_quant_weight(weight: Any) -> Any:
    """Symmetric per-output-channel INT8 quantize-dequantize of a weight tensor."""
    torch = import_torch()
    flat = weight.detach().reshape(weight.shape[0], -1)
    scale = flat.abs().amax(dim=1).clamp_min(1e-12) / QMAX
    q = torch.clamp(torch.round(flat / scale[:, None]), -QMAX, QMAX)
    return (q * scale[:, None]).reshape(weight.shape)


def activation_scale(x: Any) -> float:
    """Per-tensor scale from the 99.99th percentile of |x|."""
    torch = import_torch()
    sample = x.detach().abs().flatten().float()
    if sample.numel() > 1_000_000:
        sample = sample[torch.randperm(sample.numel(), generator=torch.Generator().manual_seed(0))
                        [:1_000_000]]
    return max(float(torch.quantile(sample, ACTIVATION_PERCENTILE / 100)), 1e-12) / QMAX


def fake_quant_activation(x: Any, scale: float) -> Any:
    """Symmetric per-tensor INT8 quantize-dequantize with a fixed scale (values beyond saturate)."""
    torch = import_torch()
    return torch.clamp(torch.round(x / scale), -QMAX, QMAX) * scale


def _layers(model: Any) -> list[tuple[str, Any]]:
    nn = import_torch().nn
    kinds = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
    return [(name, module) for name, module in model.named_modules() if isinstance(module, kinds)]


def _capture_inputs(
    model: Any, layers: list[tuple[str, Any]], x: Any
) -> tuple[Any, dict[str, Any]]:
    inputs: dict[str, Any] = {}
    hooks = [m.register_forward_pre_hook(lambda _m, a, n=name: inputs.setdefault(n, a[0]))
             for name, m in layers]
    try:
        out = model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return out, inputs


def _quantized(module: Any, scale: float) -> Callable[[], Any]:
    """Swap in fake-quantized weights and input quantization; returns the undo function."""
    original = module.weight.data.clone()
    module.weight.data = fake_quant_weight(original)
    hook = module.register_forward_pre_hook(lambda _m, a: (fake_quant_activation(a[0], scale),
                                                           *a[1:]))

    def undo() -> None:
        module.weight.data = original
        hook.remove()

    return undo


def _output(out: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return out[0]
    return getattr(out, "last_hidden_state", getattr(out, "logits", out))


def analyze_quantization(
    model: Any, example: Any, *, threshold_db: float = 30.0
) -> QuantizationReport:
    """Per-layer INT8 sensitivity of ``model`` on the calibration batch ``example``."""
    torch = import_torch()
    model = model.eval()
    layers = _layers(model)
    if not layers:
        raise InputError("the model has no Linear or Conv layers to quantize")
    with torch.inference_mode():
        reference, inputs = _capture_inputs(model, layers, example)
        reference = _output(reference)
        # layers whose weights are used without calling them (MultiheadAttention.out_proj) are
        # skipped: fake-quantizing their input here would not reach the computation
        layers = [(name, module) for name, module in layers if name in inputs]
        results, undos = [], []
        for name, module in layers:
            x = inputs[name]
            scale = activation_scale(x)
            y = module(x)
            undo = _quantized(module, scale)
            y_q = module(x)
            out_q = _output(model(example))
            undo()
            top = float(x.abs().max())
            results.append(LayerSensitivity(
                name=name, kind=type(module).__name__,
                layer_sqnr_db=sqnr_db(y, y_q), layer_rel_error=rel_error(y, y_q),
                model_sqnr_db=sqnr_db(reference, out_q),
                model_rel_error=rel_error(reference, out_q),
                input_min=float(x.min()), input_max=float(x.max()),
                outlier_ratio=top / (scale * QMAX),
                saturation_pct=100.0 * float((x.abs() > scale * QMAX).float().mean()),
            ))
        undos = [_quantized(module, activation_scale(inputs[name])) for name, module in layers]
        all_q = _output(model(example))
        for undo in reversed(undos):
            undo()
    worst_first = tuple(sorted(results, key=lambda r: r.model_sqnr_db))
    keep = tuple(r.name for r in worst_first if r.model_sqnr_db < threshold_db)
    return QuantizationReport(layers=worst_first, keep_high_precision=keep,
                              threshold_db=threshold_db,
                              all_layers_model_sqnr_db=sqnr_db(reference, all_q))


def measure_int8_speed(model: Any, example: Any, *, iters: int = 20) -> dict[str, Any]:
    """CPU latency of the FP32 model and of its dynamic-INT8 version (Linear layers), where the
    PyTorch quantized CPU backend (``torch.ao.quantization.quantize_dynamic``) can run it."""
    import copy
    import warnings

    from aiprof.measure.timing import Timing, time_calls

    torch = import_torch()
    model = model.eval().cpu()
    x = example.cpu()
    with torch.inference_mode():
        fp32 = Timing.of(time_calls(lambda: model(x), iters=iters)).p50_us
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                int8_model = torch.ao.quantization.quantize_dynamic(
                    copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
                int8 = Timing.of(time_calls(lambda: int8_model(x), iters=iters)).p50_us
        except Exception as error:  # backend missing or op unsupported: say so, keep the report
            return {"fp32_latency_us": fp32, "int8_latency_us": None, "int8_backend": None,
                    "int8_note": f"dynamic INT8 failed: {type(error).__name__}: {error}"}
    backend = torch.backends.quantized.engine
    return {"fp32_latency_us": fp32, "int8_latency_us": int8,
            "int8_backend": f"quantize_dynamic ({backend}), Linear layers only",
            "int8_note": "convolutions stay FP32 in dynamic quantization"}
