"""Planted bottlenecks and their fixed twins on one GPU: measured speedups and profiler traces.

    OUT=/some/dir python3 scripts/h200/diagnose_suite.py            # every case
    OUT=/some/dir python3 scripts/h200/diagnose_suite.py item_sync  # some cases

For each case: time the planted and the fixed version WITHOUT the profiler, alternately
(rounds of planted then fixed; each a median of 8 steps after 3 warm-up, CUDA events around
each step; CPU-side work such as the DataLoader is inside the events because the GPU reaches
the end event only after the step's launches), and between those rounds record the planted
version with aiprof's capture (``aiprof.profile`` with its defaults: 5 unprofiled steps it
times itself, 1 warm-up, 3 recorded; record_shapes, profile_memory) as a user of
``aiprof run`` would. ROUNDS_BEFORE rounds come before the capture and ROUNDS_AFTER after it,
so that a machine whose speed drifts within the case is measured around the recording.
Writes $OUT/$DIAGNOSE_DIR/<case>.trace.json.gz (DIAGNOSE_DIR defaults to "diagnose") and
labels.json beside it (case, category, planted/fixed step ms as the median over the rounds,
each round's gain, measured_speedup, gain_pct = 100 * (1 - fixed/planted), per sample for the
batch-size case, and the capture's own unprofiled step times). Needs torch and aiprof's source
(PYTHONPATH=src). Stops starting new cases after DIAGNOSE_BUDGET_S seconds (default 240);
errors are reported per case and never stop the others.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

DEV = "cuda"
WARMUP, MEASURE = 3, 8
ROUNDS_BEFORE, ROUNDS_AFTER = 2, 2
Step = Callable[[], None]


def timed(step: Step, warmup: int = WARMUP, measure: int = MEASURE) -> float:
    """Median step time (ms) from CUDA events, no profiler."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(measure)]
    for start, end in events:
        start.record()
        step()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def profile(step: Step, path: Path) -> list[float]:
    """Capture ``step`` with ``aiprof.profile`` (its default schedule) into a gzip trace;
    returns the unprofiled step times (µs) the capture measured and wrote into the trace."""
    import tempfile

    from aiprof.capture.api import profile as aiprof_profile
    from aiprof.capture.options import CaptureOptions

    options = CaptureOptions()
    steps = options.skip_steps + options.warmup_steps + options.active_steps
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        with aiprof_profile(out=run_dir, name=path.stem, sample_gpus=False) as capture:
            for _ in range(steps):
                step()
                capture.step()
        torch.cuda.synchronize()
        shutil.copyfile(run_dir / "rank0.trace.json.gz", path)
        meta = json.loads((run_dir / "meta.json").read_text())
    return list(meta["capture"].get("unprofiled_step_us", []))


def timed_rounds(planted: Step, fixed: Step, rounds: int) -> tuple[list[float], list[float]]:
    """Planted then fixed, ``rounds`` times: each round's median step time (ms) of each."""
    planted_ms, fixed_ms = [], []
    for _ in range(rounds):
        planted_ms.append(timed(planted))
        fixed_ms.append(timed(fixed))
    return planted_ms, fixed_ms


def conv_stack(channels: int, layers: int) -> nn.Module:
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.ReLU()]
    return nn.Sequential(*mods).to(DEV)


def train_step(model: nn.Module, x: torch.Tensor, opt: torch.optim.Optimizer,
               autocast: bool = False) -> Step:
    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


# ---- cases: each returns (planted step, fixed step, per-sample scale of planted, of fixed)

class HeavyDataset(torch.utils.data.Dataset):
    """Images built and augmented on the CPU per sample (a slow transform pipeline)."""

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, 160, 160, generator=g)
        for _ in range(4):  # blur + normalize passes, as heavy transforms do
            img = F.avg_pool2d(img[None], 3, stride=1, padding=1)[0]
            img = (img - img.mean()) / (img.std() + 1e-6)
        return img, i % 10


def case_dataloader() -> tuple[Step, Step, float, float]:
    model = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(32, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def make(workers: int) -> Step:
        loader = torch.utils.data.DataLoader(
            HeavyDataset(), batch_size=32, num_workers=workers, pin_memory=workers > 0,
            persistent_workers=workers > 0, prefetch_factor=4 if workers else None)
        batches = iter(loader)

        def step() -> None:
            x, y = next(batches)
            x, y = x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    return make(0), make(min(8, os.cpu_count() or 1)), 1.0, 1.0


def case_launch_bound() -> tuple[Step, Step, float, float]:
    layers = nn.Sequential(*[m for _ in range(100) for m in (nn.Linear(64, 64), nn.ReLU())])
    model = layers.to(DEV).eval()
    x = torch.randn(16, 64, device=DEV)
    planted = torch.no_grad()(lambda: model(x))
    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(x)
    return planted, graph.replay, 1.0, 1.0


def case_item_sync() -> tuple[Step, Step, float, float]:
    """One cause only: a single element read back after every GEMM (no reductions or chains of
    elementwise kernels that would be a second, unmeasured opportunity)."""
    layers = [nn.Linear(4096, 4096, bias=False).to(DEV, torch.bfloat16) for _ in range(12)]
    x = torch.randn(4096, 4096, device=DEV, dtype=torch.bfloat16)

    @torch.no_grad()
    def planted() -> None:
        h = x
        for layer in layers:
            h = layer(h)
            if h[0, 0].item() != h[0, 0].item():  # a NaN check per layer: two host syncs
                raise FloatingPointError("NaN")

    @torch.no_grad()
    def fixed() -> None:  # the same GEMMs; the check reads the last result once per step
        h = x
        for layer in layers:
            h = layer(h)
        if h[0, 0].item() != h[0, 0].item():
            raise FloatingPointError("NaN")

    return planted, fixed, 1.0, 1.0


def case_pageable_copy() -> tuple[Step, Step, float, float]:
    n = 64 * 1024 * 1024  # 256 MB of fp32
    pageable, pinned = torch.randn(n), torch.randn(n).pin_memory()
    w = torch.randn(n, device=DEV)

    def planted() -> None:
        (pageable.to(DEV) * w).sum()

    def fixed() -> None:
        (pinned.to(DEV, non_blocking=True) * w).sum()

    return planted, fixed, 1.0, 1.0


def case_fp32_conv() -> tuple[Step, Step, float, float]:
    model = conv_stack(128, 6)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 128, 56, 56, device=DEV)
    step = train_step(model, x, opt)

    def with_tf32(enabled: bool) -> Step:
        def run() -> None:
            torch.backends.cudnn.allow_tf32 = enabled
            torch.backends.cuda.matmul.allow_tf32 = enabled
            step()
        return run

    return with_tf32(False), with_tf32(True), 1.0, 1.0


def case_nchw_autocast() -> tuple[Step, Step, float, float]:
    model = conv_stack(128, 6)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 128, 56, 56, device=DEV)
    planted = train_step(model, x, opt, autocast=True)
    model_cl = conv_stack(128, 6).to(memory_format=torch.channels_last)
    opt_cl = torch.optim.SGD(model_cl.parameters(), lr=0.01)
    fixed = train_step(model_cl, x.to(memory_format=torch.channels_last), opt_cl, autocast=True)
    return planted, fixed, 1.0, 1.0


def hand_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def hand_layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def case_unfused() -> tuple[Step, Step, float, float]:
    x = torch.randn(16384, 4096, device=DEV)
    w, b = torch.ones(4096, device=DEV), torch.zeros(4096, device=DEV)

    @torch.no_grad()
    def planted() -> None:
        hand_layer_norm(hand_gelu(x), w, b)

    @torch.no_grad()
    def fixed() -> None:
        F.layer_norm(F.gelu(x, approximate="tanh"), (4096,), w, b)

    return planted, fixed, 1.0, 1.0


def case_misaligned() -> tuple[Step, Step, float, float]:
    def make(dim: int) -> Step:
        layers = [nn.Linear(dim, dim, bias=False).to(DEV) for _ in range(4)]
        x = torch.randn(8192, dim, device=DEV)

        @torch.no_grad()
        def step() -> None:
            h = x
            with torch.autocast("cuda", dtype=torch.bfloat16):
                for layer in layers:
                    h = layer(h)
        return step

    return make(4095), make(4096), 1.0, 1.0


def case_empty_cache() -> tuple[Step, Step, float, float]:
    model = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(2048, 2048), nn.GELU())])
    model = model.to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(2048, 2048, device=DEV)
    step = train_step(model, x, opt, autocast=True)

    def planted() -> None:
        step()
        torch.cuda.empty_cache()

    return planted, step, 1.0, 1.0


def case_tiny_batch() -> tuple[Step, Step, float, float]:
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    small, large = 4, 512

    def make(batch: int) -> Step:
        x = torch.randn(batch, 512, device=DEV)
        y = torch.randint(0, 10, (batch,), device=DEV)

        def step() -> None:
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    return make(small), make(large), 1.0 / small, 1.0 / large


def case_healthy() -> tuple[Step, Step, float, float]:
    model = conv_stack(256, 8).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(128, 256, 28, 28, device=DEV).to(memory_format=torch.channels_last)
    step = train_step(model, x, opt, autocast=True)
    return step, step, 1.0, 1.0


def case_healthy_gpt2() -> tuple[Step, Step, float, float]:
    """A large-batch bf16 GPT-2 (124M config, random weights) training step: nothing to fix."""
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=50304)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, 50304, (16, 1024), device=DEV)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, step, 1.0, 1.0


CASES: dict[str, tuple[str, Callable[[], tuple[Step, Step, float, float]]]] = {
    "dataloader_no_workers": ("dataloader", case_dataloader),
    "launch_bound_tiny_kernels": ("cpu_bound", case_launch_bound),
    "item_sync_per_layer": ("host_sync", case_item_sync),
    "pageable_copies": ("h2d_transfer", case_pageable_copy),
    "fp32_conv_no_tf32": ("tensor_cores_unused", case_fp32_conv),
    "nchw_conv_autocast": ("layout_conversion", case_nchw_autocast),
    "unfused_gelu_layernorm": ("unfused_elementwise", case_unfused),
    "linear_4095": ("misaligned_shapes", case_misaligned),
    "empty_cache_each_step": ("allocator_churn", case_empty_cache),
    "tiny_batch": ("cpu_bound", case_tiny_batch),
    "healthy_convnet_bf16": ("none", case_healthy),
    "healthy_gpt2_bf16": ("none", case_healthy_gpt2),
}


def run_case(name: str, category: str, build: Callable[[], tuple[Step, Step, float, float]],
             out: Path) -> dict[str, object]:
    torch.manual_seed(0)
    planted, fixed, planted_scale, fixed_scale = build()
    planted_rounds, fixed_rounds = timed_rounds(planted, fixed, ROUNDS_BEFORE)
    capture_us = profile(planted, out / f"{name}.trace.json.gz")
    after = timed_rounds(planted, fixed, ROUNDS_AFTER)
    planted_rounds, fixed_rounds = planted_rounds + after[0], fixed_rounds + after[1]
    planted_ms, fixed_ms = statistics.median(planted_rounds), statistics.median(fixed_rounds)
    per_planted, per_fixed = planted_ms * planted_scale, fixed_ms * fixed_scale
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's defaults again
    torch.backends.cuda.matmul.allow_tf32 = False
    return {
        "case": name, "category": category, "trace": f"{name}.trace.json.gz",
        "planted_step_ms": round(planted_ms, 4), "fixed_step_ms": round(fixed_ms, 4),
        "planted_rounds_ms": [round(t, 4) for t in planted_rounds],
        "fixed_rounds_ms": [round(t, 4) for t in fixed_rounds],
        "rounds_before_capture": ROUNDS_BEFORE,
        "round_gain_pct": [round(100.0 * (1.0 - (f * fixed_scale) / (p * planted_scale)), 2)
                           for p, f in zip(planted_rounds, fixed_rounds, strict=True)],
        "capture_unprofiled_step_ms": [round(t / 1000.0, 4) for t in capture_us],
        "per_sample": planted_scale != 1.0,
        "measured_speedup": round(per_planted / per_fixed, 4),
        "gain_pct": round(100.0 * (1.0 - per_fixed / per_planted), 2),
    }


def main(argv: list[str]) -> int:
    out = Path(os.environ.get("OUT", "out")) / os.environ.get("DIAGNOSE_DIR", "diagnose")
    out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("diagnose_suite: no CUDA device; nothing measured")
        return 0
    budget = float(os.environ.get("DIAGNOSE_BUDGET_S", "240"))
    wanted = argv or list(CASES)
    began = time.monotonic()
    labels: dict[str, object] = {
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "method": f"CUDA events, no profiler: rounds of planted then fixed, each the median of "
                  f"{MEASURE} steps after {WARMUP} warm-up, {ROUNDS_BEFORE} before and "
                  f"{ROUNDS_AFTER} after the trace's capture by aiprof.profile (default "
                  "schedule); gain from the medians of the rounds",
        "cases": [],
    }
    for name in wanted:
        if time.monotonic() - began > budget:
            labels["cases"].append({"case": name, "error": "skipped: time budget spent"})
            continue
        category, build = CASES[name]
        started = time.monotonic()
        try:
            row = run_case(name, category, build, out)
        except Exception as error:  # report, never crash the batch
            row = {"case": name, "category": category, "error": repr(error)[:500]}
            traceback.print_exc()
        row["wall_s"] = round(time.monotonic() - started, 1)
        labels["cases"].append(row)
        (out / "labels.json").write_text(json.dumps(labels, indent=2))
        print("diagnose:", json.dumps(row))
        torch.cuda.empty_cache()
    print(f"diagnose: {len(labels['cases'])} cases in {time.monotonic() - began:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
