"""Tensor-operation measurements on an H200, for aiprof's tests and docs (issue 6).

Run from the repository root:  OUT=/some/dir PYTHONPATH=src python3 scripts/h200/tensor_h200.py
Writes into $OUT/tensor/:
  ceilings.json                measured roofs (measure.tensor.ceilings), loadable by --ceilings
  linear_alignment.json        Linear(4095) vs Linear(4096) bf16 timing, alignment lint output
  layout.json                  ResNet-50 bf16 train step NCHW vs channels_last, layout lint counts,
                               time of the NCHW<->NHWC conversion kernels in the NCHW profile
  fusion.json                  hand-written GELU chain: eager vs torch.compile (if time allows)
  resnet50_cl.trace.json.gz    torch.profiler trace (record_shapes), 2 training steps, bf16
  resnet50_nchw.trace.json.gz  the same in NCHW
  gpt2.trace.json.gz           GPT-2 (124M config, no download) 2 training steps, bf16 autocast
  summary.txt                  what printed below
Every part catches its own errors; the script never fails the batch. TENSOR_SMOKE=1 runs tiny
sizes (also on a CPU) to check the script itself.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import torch

START = time.time()
SMOKE = os.environ.get("TENSOR_SMOKE") == "1"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
OUT = Path(os.environ.get("OUT", "out")) / "tensor"
LINES: list[str] = []


def say(text: str) -> None:
    LINES.append(text)
    print(text, flush=True)


def dump(name: str, data: object) -> None:
    (OUT / name).write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def median_ms(fn, iters: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    return samples[len(samples) // 2]


def gpu_time_ms(fn) -> float | None:
    """GPU time of one call (CUDA events), to tell a host-bound step from a device-bound one."""
    if DEVICE != "cuda":
        return None
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sync()
    start.record()
    fn()
    end.record()
    sync()
    return start.elapsed_time(end)


def part_ceilings() -> None:
    from aiprof.measure.tensor.ceilings import measure_ceilings

    measured = measure_ceilings(quick=SMOKE)
    c = measured.ceilings
    dump("ceilings.json", dataclasses.asdict(c))
    dump(
        "ceilings_run.json",
        {
            "device": measured.device,
            "gemm_size": measured.gemm_size,
            "copy_bytes": measured.copy_bytes,
            "skipped": list(measured.skipped),
        },
    )
    peaks = ", ".join(f"{k} {v / 1e12:.1f} TF" for k, v in c.matmul_flops_per_s.items())
    say(
        f"ceilings: copy {c.memory_bytes_per_s / 1e9:.0f} GB/s; GEMM {peaks}; launch "
        f"{c.launch_latency_us:.2f} us; "
        + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in c.extra.items())
    )


def part_linear() -> None:
    from aiprof.measure.tensor.model_analysis import analyze_model
    from aiprof.tensor.alignment import lint_alignment
    from aiprof.tensor.ceilings_model import ceilings_for_gpu

    rows = 256 if SMOKE else 4096
    result = {"rows": rows, "dtype": "bfloat16", "layers": {}}
    for features in (4095, 4096):
        layer = torch.nn.Linear(features, features, device=DEVICE, dtype=torch.bfloat16)
        x = torch.randn(rows, features, device=DEVICE, dtype=torch.bfloat16)
        with torch.no_grad():
            ms = median_ms(lambda layer=layer, x=x: layer(x), iters=5 if SMOKE else 50)
            calls = [op.call for op in analyze_model(layer, (x,)).recorded]
        flops = 2 * rows * features * features
        gemm = [c for c in calls if c.op in ("addmm", "mm", "linear")]
        findings = lint_alignment(
            gemm, ceilings_for_gpu("H200"), [ms * 1e3] * len(gemm), check_pointers=DEVICE == "cuda"
        )
        result["layers"][str(features)] = {
            "median_ms": ms,
            "tflops": flops / (ms * 1e-3) / 1e12,
            "findings": [dataclasses.asdict(f) for f in findings],
        }
        say(
            f"linear {features}: {ms * 1e3:.1f} us, {flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s, "
            f"{len(findings)} alignment findings"
        )
    dump("linear_alignment.json", result)


def resnet50():
    try:
        import torchvision

        return torchvision.models.resnet50(weights=None)
    except Exception:
        if not SMOKE:
            raise
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.tensor.nets import resnet50 as local

        return local()


def train_step(model, inputs, optimizer, loss_fn):
    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = loss_fn(model, inputs)
        loss.backward()
        optimizer.step()

    return step


def profile(step, name: str, steps: int = 2) -> dict:
    from torch.profiler import ProfilerActivity, schedule
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
    raw = OUT / f"{name}.trace.json"
    with torch_profile(
        activities=activities,
        record_shapes=True,
        schedule=schedule(wait=1, warmup=1, active=steps),
        on_trace_ready=lambda p: p.export_chrome_trace(str(raw)),
    ) as prof:
        for _ in range(2 + steps):
            step()
            prof.step()
    conversion_us = 0.0
    for event in prof.key_averages():
        key = event.key.lower()
        if "nchwtonhwc" in key or "nhwctonchw" in key:
            conversion_us += getattr(event, "device_time_total", 0.0) or 0.0
    with raw.open("rb") as src, gzip.open(str(raw) + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    size = (OUT / f"{name}.trace.json.gz").stat().st_size
    say(
        f"trace {name}: {size / 1e6:.2f} MB gz, "
        f"NCHW<->NHWC conversion kernels {conversion_us:.0f} us"
    )
    return {"trace_bytes": size, "conversion_kernels_us": conversion_us, "steps": steps}


def part_resnet() -> None:
    from aiprof.measure.tensor.model_analysis import analyze_model
    from aiprof.tensor.layout import lint_layout

    batch, size = (2, 64) if SMOKE else (64, 224)
    result: dict = {"batch": batch, "image": size, "dtype": "bfloat16 autocast"}
    for layout in ("nchw", "cl"):
        torch.manual_seed(0)
        model = resnet50().to(DEVICE)
        x = torch.randn(batch, 3, size, size, device=DEVICE)
        y = torch.randint(0, 1000, (batch,), device=DEVICE)
        if layout == "cl":
            model = model.to(memory_format=torch.channels_last)
            x = x.to(memory_format=torch.channels_last)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        step = train_step(
            model, x, optimizer, lambda m, i, y=y: torch.nn.functional.cross_entropy(m(i), y)
        )
        ms = median_ms(step, iters=3 if SMOKE else 15)
        gpu_ms = gpu_time_ms(step)
        torch.backends.cudnn.benchmark = True  # let cuDNN pick its kernels for this layout
        bench_ms = median_ms(step, iters=3 if SMOKE else 15)
        torch.backends.cudnn.benchmark = False
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            calls = [op.call for op in analyze_model(model, (x,)).recorded]
        lint = lint_layout(calls)
        flagged = sum(1 for f in lint.findings if f.kind == "nchw_half_conv")
        entry = {
            "step_ms": ms,
            "gpu_ms": gpu_ms,
            "step_ms_cudnn_benchmark": bench_ms,
            "convs_checked": lint.num_convs_checked,
            "nchw_half_convs": flagged,
            "strided_copies": sum(1 for f in lint.findings if f.kind == "strided_copy"),
            "conversion_bytes": sum(f.converted_bytes for f in lint.findings),
        }
        entry.update(profile(step, f"resnet50_{layout}"))
        result[layout] = entry
        say(
            f"resnet50 {layout}: step {ms:.1f} ms (GPU {gpu_ms or 0:.1f} ms), "
            f"layout lint {flagged}/{lint.num_convs_checked} convs, "
            f"cudnn.benchmark step {bench_ms:.1f} ms"
        )
    dump("layout.json", result)


def part_gpt2() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=128, n_head=4) if SMOKE else GPT2Config()
    batch, seq = (2, 64) if SMOKE else (8, 512)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).to(DEVICE)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = train_step(model, ids, optimizer, lambda m, i: m(i, labels=i).loss)
    ms = median_ms(step, iters=3 if SMOKE else 10)
    say(f"gpt2: batch {batch} x {seq}, step {ms:.1f} ms")
    info = profile(step, "gpt2")
    dump("gpt2.json", {"batch": batch, "seq": seq, "step_ms": ms, **info})


def part_fusion() -> None:
    if time.time() - START > 70 and not SMOKE:
        say("fusion: skipped (time budget)")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from aiprof.measure.tensor.fusion_verify import verify_fusion
    from aiprof.measure.tensor.model_analysis import analyze_model
    from aiprof.tensor.fusion import analyze_fusion

    class GeluChain(torch.nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(dim, dim)

        def forward(self, x):
            y = self.fc(x)
            return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))

    dim, rows = (64, 32) if SMOKE else (4096, 8192)
    model = GeluChain(dim).to(DEVICE)
    x = torch.randn(rows, dim, device=DEVICE)
    with torch.no_grad():
        report = analyze_fusion([op.call for op in analyze_model(model, (x,)).recorded])
    verified = verify_fusion(model, (x,), repeats=5 if SMOKE else 20)
    dump(
        "fusion.json",
        {
            "rows": rows,
            "dim": dim,
            "bytes_saved": report.total_bytes_saved,
            "launches_saved": report.total_launches_saved,
            "verify": dataclasses.asdict(verified),
        },
    )
    say(
        f"fusion: {report.total_bytes_saved / 1e6:.1f} MB saved predicted; torch.compile "
        f"{verified.eager_us:.0f} -> {verified.compiled_us:.0f} us ({verified.speedup:.2f}x)"
    )


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    say(
        f"device {torch.cuda.get_device_name(0) if DEVICE == 'cuda' else 'cpu'}, "
        f"torch {torch.__version__}"
    )
    parts = (part_ceilings, part_linear, part_resnet, part_gpt2, part_fusion)
    chosen = os.environ.get("TENSOR_PARTS", "")  # e.g. "fusion,linear" to run only those
    for part in parts:
        if chosen and part.__name__.removeprefix("part_") not in chosen.split(","):
            continue
        try:
            part()
        except Exception as error:  # report and go on: never fail the batch
            say(f"{part.__name__}: FAILED {type(error).__name__}: {error}")
            traceback.print_exc()
        say(f"  [{time.time() - START:.0f} s]")
    (OUT / "summary.txt").write_text("\n".join(LINES) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
