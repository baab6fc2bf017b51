"""Inference measurements on one GPU for aiprof's docs and CPU tests (issue 7).

For torchvision ResNet-50 and transformers BERT-base (both built from their config, no download):
latency curve per batch size, image-pipeline stage breakdown (ResNet-50), cold start in a fresh
process, CUDA-graph gain, per-layer INT8 sensitivity, INT8 against BF16 GEMM speed, and the real
dynamic batcher against the simulator at two loads.
Results go to $OUT/inference/ as CSV and JSON. Every part catches its own errors.

    OUT=/some/dir PYTHONPATH=src python3 scripts/h200/inference_gpu.py
    PYTHONPATH=src python3 scripts/h200/inference_gpu.py --smoke   # tiny CPU models, checks paths
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from aiprof.inference.agreement import calibrate_overhead_us, measure_real
from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.simulator import SimulationOptions, simulate
from aiprof.jsontext import dumps
from aiprof.measure.inference.bench import batch_function, measure_curve, measure_serving_curve
from aiprof.measure.inference.coldstart import measure_coldstart
from aiprof.measure.inference.cudagraph import measure_cuda_graph
from aiprof.measure.inference.quantize import analyze_quantization, measure_int8_speed
from aiprof.measure.inference.stages import run_stages
from aiprof.measure.timing import Timing, time_calls

BERT_SEQ = 128
BATCHES = (1, 2, 4, 8, 16, 32, 64)
SMOKE_BATCHES = (1, 2, 4)
BUDGET_S = 80.0  # the batch of scripts allows 90 s; later parts are skipped past this


def resnet50() -> Any:
    import torchvision

    return torchvision.models.resnet50(weights=None)


def resnet_input(batch: int) -> Any:
    return torch.randn(batch, 3, 224, 224)


class BertEncoder(torch.nn.Module):
    """BERT-base (transformers BertModel from BertConfig()) returning the last hidden state."""

    def __init__(self, attention: str | None = None) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        config = BertConfig()
        if attention is not None:  # "eager": no data-dependent mask check, so capturable
            config._attn_implementation = attention
        self.bert = BertModel(config)

    def forward(self, input_ids: Any) -> Any:
        return self.bert(input_ids=input_ids).last_hidden_state


def bert_input(batch: int) -> Any:
    return torch.randint(0, 30522, (batch, BERT_SEQ))


def tiny_cnn() -> Any:
    from aiprof.measure.inference.demo_models import small_cnn

    return small_cnn(10)


def tiny_bert() -> Any:
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def tiny_bert_input(batch: int) -> Any:
    return torch.randn(batch, 16, 32)


MODELS = {
    "resnet50": (resnet50, resnet_input),
    "bert-base": (BertEncoder, bert_input),
}
SMOKE_MODELS = {"resnet50": (tiny_cnn, resnet_input), "bert-base": (tiny_bert, tiny_bert_input)}


def part(name: str, results: dict[str, Any], fn: Any) -> Any:
    """Run one measurement; record its error instead of stopping the script."""
    begin = time.perf_counter()
    try:
        value = fn()
        results[name] = {"ok": True, "seconds": time.perf_counter() - begin}
        return value
    except Exception as error:  # one broken part must not lose the others
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}",
                         "trace": traceback.format_exc(limit=3)}
        print(f"[inference] {name} failed: {error}", file=sys.stderr)
        return None


def latency_curves(models: dict[str, Any], device: str, out: Path,
                   batches: tuple[int, ...]) -> dict[str, Any]:
    rows = ["model,batch_size,p50_ms,p90_ms,p99_ms,items_per_s"]
    curves = {}
    for name, (factory, make_input) in models.items():
        measured = measure_curve(factory(), make_input, batches, device=device, warmup=5,
                                 iters=20)
        curves[name] = measured
        for batch, t in zip(measured.batch_sizes, measured.timings, strict=True):
            rows.append(f"{name},{batch},{t.p50_us / 1e3:.4f},{t.p90_us / 1e3:.4f},"
                        f"{t.p99_us / 1e3:.4f},{batch / t.p50_us * 1e6:.1f}")
    (out / "latency_curve.csv").write_text("\n".join(rows) + "\n")
    return curves


def coldstart_in_fresh_process(name: str, device: str, smoke: bool) -> dict[str, Any]:
    """Cold start measured in a new interpreter (CUDA context creation included)."""
    args = [sys.executable, __file__, "--coldstart-child", name, "--device", device]
    if smoke:
        args.append("--smoke")
    begin = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ})
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["process_wall_s"] = time.perf_counter() - begin
    return report


def coldstart_child(name: str, device: str, smoke: bool) -> None:
    import_begin = time.perf_counter()
    factory, make_input = (SMOKE_MODELS if smoke else MODELS)[name]
    report = measure_coldstart(factory, make_input, device=device, batch_size=1, iters=10)
    payload = json.loads(dumps(report, indent=0).replace("\n", ""))
    payload["measure_s"] = time.perf_counter() - import_begin
    print(json.dumps(payload))


def serving(curves: dict[str, Any], device: str, smoke: bool) -> dict[str, Any]:
    """Real batcher serving ResNet-50 against the simulator, at 40% and 80% of the capacity of the
    serving path (host stacking, pageable copy, forward, split), which is what a batch costs."""
    factory, make_input = (SMOKE_MODELS if smoke else MODELS)["resnet50"]
    model_fn = batch_function(factory(), device)
    sample = make_input(1)[0]
    max_batch = 8 if smoke else 32
    serving_curve = measure_serving_curve(model_fn, sample, (1, max_batch // 4, max_batch // 2,
                                                             max_batch), iters=10)
    curve = serving_curve.curve()
    policy = BatchPolicy(max_batch_size=max_batch, max_queue_delay_us=2000)
    overhead = calibrate_overhead_us(model_fn, curve, 50, lambda _: sample)
    rows = []
    for share in (0.4, 0.8):
        rate = share * curve.capacity_rps(max_batch)
        arrivals = poisson_arrivals(rate, 300 if smoke else 2000, seed=1)
        real = measure_real(model_fn, policy, arrivals, lambda _: sample)
        predicted = simulate(arrivals, curve, policy, SimulationOptions(overhead_us=overhead))
        rows.append({"rate_rps": rate, "share_of_capacity": share, "overhead_us": overhead,
                     "real": real, "simulated": predicted})
    return {"serving_curve": serving_curve, "forward_curve": curves["resnet50"], "rows": rows}


def quantization(models: dict[str, Any], device: str) -> dict[str, Any]:
    """Per-layer INT8 sensitivity on the GPU (batch 8), and dynamic-INT8 CPU speed of BERT."""
    out: dict[str, Any] = {}
    for name, (factory, make_input) in models.items():
        torch.manual_seed(0)
        model = factory().to(device)
        report = analyze_quantization(model, make_input(8).to(device))
        out[name] = {"all_layers_model_sqnr_db": report.all_layers_model_sqnr_db,
                     "keep_high_precision": report.keep_high_precision,
                     "worst_layers": report.layers[:5], "num_layers": len(report.layers)}
    factory, make_input = models["bert-base"]
    out["bert-base"]["cpu_int8_speed"] = measure_int8_speed(factory(), make_input(1), iters=10)
    return out


def int8_gemm_speed(device: str) -> dict[str, Any]:
    """INT8 (torch._int_mm) against BF16 matmul on BERT-base's FFN shape, tokens = 8 x 128."""
    m, k, n = 1024, 768, 3072
    a8 = torch.randint(-128, 127, (m, k), dtype=torch.int8, device=device)
    b8 = torch.randint(-128, 127, (k, n), dtype=torch.int8, device=device)
    a16, b16 = a8.to(torch.bfloat16), b8.to(torch.bfloat16)
    int8 = Timing.of(time_calls(lambda: torch._int_mm(a8, b8), device=device, iters=50))
    bf16 = Timing.of(time_calls(lambda: a16 @ b16, device=device, iters=50))
    flops = 2 * m * k * n
    return {"shape_mkn": [m, k, n], "int8": int8, "bf16": bf16,
            "int8_tops": flops / int8.p50_us / 1e6, "bf16_tflops": flops / bf16.p50_us / 1e6,
            "int8_speedup": bf16.p50_us / int8.p50_us}


def cuda_graphs(models: dict[str, Any], device: str, status: dict[str, Any]) -> dict[str, Any]:
    """Graph gain at batch 1 and 8; BERT falls back to eager attention if SDPA cannot be captured
    (its mask check reads a value on the host, which capture forbids)."""
    out: dict[str, Any] = {}
    for name, (factory, make_input) in models.items():
        for batch in (1, 8):
            key = f"{name} batch {batch}"
            report = part(f"cuda graph {key}", status, lambda f=factory, m=make_input, b=batch:
                          measure_cuda_graph(f(), m(b), device=device))
            if report is None and factory is BertEncoder:
                report = part(f"cuda graph {key} (eager attention)", status,
                              lambda m=make_input, b=batch: measure_cuda_graph(
                                  BertEncoder("eager"), m(b), device=device))
                key += " (eager attention)"
            out[key] = report
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="aiprof inference measurements on a GPU")
    parser.add_argument("--smoke", action="store_true", help="tiny models (any device)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--coldstart-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.coldstart_child:
        coldstart_child(args.coldstart_child, device, args.smoke)
        return
    started = time.perf_counter()
    out = Path(os.environ.get("OUT", "out")) / "inference"
    out.mkdir(parents=True, exist_ok=True)
    models = SMOKE_MODELS if args.smoke else MODELS
    status: dict[str, Any] = {}
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu",
        "torch": str(torch.__version__), "smoke": args.smoke, "bert_seq_len": BERT_SEQ,
    }
    torch.backends.cudnn.benchmark = False  # fixed algorithms: comparable first/warm runs
    results["coldstart"] = {name: part(f"coldstart {name}", status, lambda n=name:
                                       coldstart_in_fresh_process(n, device, args.smoke))
                            for name in models}
    batches = SMOKE_BATCHES if args.smoke else BATCHES
    curves = part("latency curves", status,
                  lambda: latency_curves(models, device, out, batches)) or {}
    results["latency_curve"] = curves
    results["stages"] = part("stages", status, lambda: run_stages(
        models["resnet50"][0](), device=device, batch_size=batches[-1] if args.smoke else 32,
        iters=10, warmup=3))
    if device.startswith("cuda"):
        results["cuda_graph"] = cuda_graphs(models, device, status)
    if time.perf_counter() - started < BUDGET_S - 25:
        results["quantization"] = part("quantization", status,
                                       lambda: quantization(models, device))
    if device.startswith("cuda"):
        results["int8_gemm"] = part("int8 gemm", status, lambda: int8_gemm_speed(device))
    if "resnet50" in curves and time.perf_counter() - started < BUDGET_S - 15:
        results["serving"] = part("serving", status, lambda: serving(curves, device, args.smoke))
    results["status"] = status
    results["total_s"] = time.perf_counter() - started
    try:
        (out / "results.json").write_text(dumps(results) + "\n")
    except Exception as error:  # keep what can be kept
        print(f"[inference] could not write results.json: {error}", file=sys.stderr)
        (out / "status.json").write_text(json.dumps(status, indent=2, default=str) + "\n")
    print(f"[inference] {results['device']}: wrote {out}/results.json and latency_curve.csv "
          f"in {results['total_s']:.1f} s")
    for name, state in status.items():
        print(f"[inference]   {name}: {'ok' if state['ok'] else state['error']}")
    for name, measured in curves.items():
        t1, tn = measured.timings[0], measured.timings[-1]
        print(f"[inference]   {name}: batch 1 {t1.p50_us / 1e3:.2f} ms, batch "
              f"{measured.batch_sizes[-1]} {tn.p50_us / 1e3:.2f} ms")


if __name__ == "__main__":
    main()
