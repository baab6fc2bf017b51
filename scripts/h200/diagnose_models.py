"""Workloads behind the gain models of docs/diagnose.md, each with every fix measured.

    OUT=/some/dir PYTHONPATH=src python3 scripts/h200/diagnose_models.py          # all cases
    OUT=/some/dir PYTHONPATH=src python3 scripts/h200/diagnose_models.py mask_index_loss
    OUT=/tmp/smoke PYTHONPATH=src python3 scripts/h200/diagnose_models.py --smoke  # CPU, tiny

Three groups (issue 15's failure classes 1-3), none of them the issue's workloads verbatim:

- launch overhead: a transformer encoder in bf16 and a bottleneck conv net in bf16, both
  GPU-bound at their batch, and a small MLP that is launch-bound; the fix measured is the whole
  training step captured in one CUDA graph (static inputs, capturable AdamW);
- implicit syncs: a loss over boolean-masked tokens (``x[mask]`` calls ``nonzero``), a NaN
  check in an ``if`` (``aten::is_nonzero``), a per-parameter ``.item()`` gradient-norm loop;
  the fix is the same step without the sync (``torch.where`` weights, no check, one
  ``torch._foreach_norm``);
- kernel paths: an FP32 encoder (fixes: TF32; bf16 autocast), hand-written attention (fix:
  ``F.scaled_dot_product_attention``), a BatchNorm conv net under bf16 autocast in NCHW (fix:
  ``channels_last``), a GPT-style decoder (fix: ``torch.compile``).

For each case the planted step and each fix are timed without the profiler in interleaved
rounds (planted, then each fix; median of 8 steps after 3 warm-up per block; CUDA events),
two rounds before and two after the recordings. The planted step is recorded twice: with
``aiprof.profile`` (its defaults: it times 5 unprofiled steps itself and writes them into the
trace) and with plain ``torch.profiler`` (CPU+CUDA, record_shapes, 3 steps after 2 warm-up,
as a user would; no unprofiled timing). Writes ``$OUT/models/labels.json`` (every fix's step
times per round and its gain) and ``$OUT/models/traces.tar`` (the traces, gzip JSON). Stops
starting new cases after MODELS_BUDGET_S seconds (default 420); an error in one case is
reported in its label and never stops the others.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

SMOKE = "--smoke" in sys.argv or not torch.cuda.is_available()
DEV = "cpu" if SMOKE else "cuda"
WARMUP, MEASURE = (1, 2) if SMOKE else (3, 8)
ROUNDS_BEFORE, ROUNDS_AFTER = (1, 0) if SMOKE else (2, 2)
Step = Callable[[], None]


def size(full: int, smoke: int) -> int:
    return smoke if SMOKE else full


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def timed(step: Step) -> float:
    """Median step time (ms) without the profiler: CUDA events, else the host clock."""
    for _ in range(WARMUP):
        step()
    sync()
    times = []
    for _ in range(MEASURE):
        if DEV == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            step()
            times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


def record_aiprof(step: Step, path: Path) -> list[float]:
    from aiprof.capture.api import profile
    from aiprof.capture.options import CaptureOptions

    options = CaptureOptions()
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        with profile(out=run_dir, name=path.stem, sample_gpus=False) as capture:
            for _ in range(options.skip_steps + options.warmup_steps + options.active_steps):
                step()
                capture.step()
        sync()
        shutil.copyfile(run_dir / "rank0.trace.json.gz", path)
        meta = json.loads((run_dir / "meta.json").read_text())
    return list(meta["capture"].get("unprofiled_step_us", []))


def record_plain(step: Step, path: Path) -> None:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if DEV == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    schedule = torch.profiler.schedule(wait=0, warmup=2, active=3)
    with torch.profiler.profile(activities=activities, schedule=schedule,
                                record_shapes=True) as prof:
        for _ in range(5):
            step()
            sync()
            prof.step()
    raw = path.with_suffix("")
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()


# ---- models (random weights, built here: nothing downloaded)

def encoder(width: int, layers: int) -> nn.Module:
    layer = nn.TransformerEncoderLayer(width, max(width // 64, 1), 4 * width, dropout=0.1,
                                       batch_first=True, norm_first=False)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(DEV)


class Bottleneck(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        mid = channels // 4
        self.body = nn.Sequential(
            nn.Conv2d(channels, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.body(x))


def convnet(channels: int, blocks: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, channels, 3, padding=1, bias=False),
                         *[Bottleneck(channels) for _ in range(blocks)]).to(DEV)


class HandAttention(nn.Module):
    """Self-attention written out: the S x S scores are materialized (or SDPA when fused)."""

    def __init__(self, width: int, heads: int, fused: bool) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.heads, self.fused = heads, fused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, w = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, w // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
            mask = torch.ones(s, s, device=x.device, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
            y = F.dropout(scores.softmax(-1), 0.1) @ v
        return self.out(y.transpose(1, 2).reshape(b, s, w))


class Decoder(nn.Module):
    """GPT-style pre-norm blocks with a tanh-GELU written out (as GPT-2 code writes it)."""

    def __init__(self, vocab: int, width: int, layers: int, fused_attention: bool) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(vocab, width), nn.Linear(width, vocab, bias=False)
        self.blocks = nn.ModuleList(
            nn.ModuleList([nn.LayerNorm(width), HandAttention(width, max(width // 64, 1),
                                                              fused_attention),
                           nn.LayerNorm(width), nn.Linear(width, 4 * width),
                           nn.Linear(4 * width, width)]) for _ in range(layers))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for ln1, attn, ln2, up, down in self.blocks:  # type: ignore[misc]
            x = x + attn(ln1(x))
            h = up(ln2(x))
            h = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h.pow(3))))
            x = x + down(h)
        return self.head(x)


def trainer(model: nn.Module, make_loss: Callable[[], torch.Tensor],
            autocast: bool, capturable: bool = False) -> tuple[Step, torch.optim.Optimizer]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=capturable)

    def step() -> None:
        # a graph capture needs autocast's weight-cast cache off (PyTorch CUDA graphs docs)
        with torch.autocast(DEV, dtype=torch.bfloat16, enabled=autocast,
                            cache_enabled=not capturable):
            loss = make_loss()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, opt


def graphed(build: Callable[[bool], Step]) -> Step:
    """The whole training step captured in one CUDA graph (PyTorch's whole-network capture)."""
    if DEV != "cuda":  # smoke run on the CPU: no graphs, the eager step stands in
        return build(False)
    step = build(True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()

    def replay() -> None:
        graph.replay()
    replay.captured = step  # type: ignore[attr-defined]  # keeps the graph's tensors alive
    return replay


# ---- cases: each returns (planted step, {fix name: fixed step})

Case = tuple[Step, dict[str, Step]]


def case_encoder_bf16() -> Case:
    """Encoder 12 x 768, batch 32 x 256 tokens, bf16: GPU-bound; fix: whole-step graph."""
    batch, seq = size(32, 2), size(256, 16)

    def build(capturable: bool) -> Step:
        torch.manual_seed(0)
        model = encoder(size(768, 64), size(12, 2))
        x = torch.randn(batch, seq, size(768, 64), device=DEV)
        return trainer(model, lambda: model(x).float().square().mean(), True, capturable)[0]
    return build(False), {"cuda_graph": graphed(build)}


def case_convnet_bf16() -> Case:
    """Bottleneck conv net (256 ch, 8 blocks, 56 x 56), batch 64, bf16 NCHW: GPU-bound."""
    def build(capturable: bool) -> Step:
        torch.manual_seed(0)
        model = convnet(size(256, 16), size(8, 2))
        x = torch.randn(size(64, 2), 3, size(56, 16), size(56, 16), device=DEV)
        return trainer(model, lambda: model(x).float().square().mean(), True, capturable)[0]
    return build(False), {"cuda_graph": graphed(build)}


def case_small_mlp() -> Case:
    """MLP 12 x 256, batch 32, FP32 training: launch-bound; fix: whole-step graph."""
    def build(capturable: bool) -> Step:
        torch.manual_seed(0)
        layers: list[nn.Module] = []
        for _ in range(12):
            layers += [nn.Linear(256, 256), nn.GELU()]
        model = nn.Sequential(*layers).to(DEV)
        x = torch.randn(32, 256, device=DEV)
        return trainer(model, lambda: model(x).square().mean(), False, capturable)[0]
    return build(False), {"cuda_graph": graphed(build)}


def _token_model() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    width = size(512, 64)
    model = nn.Sequential(encoder(width, size(4, 1)), nn.Linear(width, size(8192, 128))).to(DEV)
    ids = torch.randint(0, size(8192, 128), (size(16, 2), size(256, 16)), device=DEV)
    return model, torch.randn(*ids.shape, width, device=DEV), ids


def case_mask_index_loss() -> Case:
    """Loss over the tokens a boolean mask selects: logits[mask] (nonzero syncs)."""
    model, x, ids = _token_model()
    keep = ids % 3 != 0

    def planted_loss() -> torch.Tensor:
        logits = model(x)
        return F.cross_entropy(logits[keep].float(), ids[keep])

    def fixed_loss() -> torch.Tensor:  # the same loss, weights instead of a selection
        logits = model(x).float()
        per_token = F.cross_entropy(logits.flatten(0, 1), ids.flatten(), reduction="none")
        weight = keep.flatten().float()
        return (per_token * weight).sum() / weight.sum()
    return trainer(model, planted_loss, True)[0], {"no_sync": trainer(model, fixed_loss, True)[0]}


def case_nan_check_if() -> Case:
    """`if torch.isnan(loss): ...` after the forward, every step (aten::is_nonzero)."""
    model, x, ids = _token_model()

    def planted_loss() -> torch.Tensor:
        loss = F.cross_entropy(model(x).float().flatten(0, 1), ids.flatten())
        if torch.isnan(loss):
            raise FloatingPointError("loss is NaN")
        return loss

    def fixed_loss() -> torch.Tensor:
        return F.cross_entropy(model(x).float().flatten(0, 1), ids.flatten())
    return trainer(model, planted_loss, True)[0], {"no_sync": trainer(model, fixed_loss, True)[0]}


def case_grad_norm_items() -> Case:
    """Per-parameter gradient norms read with .item() after backward (logging)."""
    model, x, ids = _token_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    params = [p for p in model.parameters() if p.requires_grad]
    norms: list[object] = []

    def make(fixed: bool) -> Step:
        def step() -> None:
            with torch.autocast(DEV, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x).float().flatten(0, 1), ids.flatten())
            loss.backward()
            if fixed:
                norms.append(torch.stack(torch._foreach_norm([p.grad for p in params])))
            else:
                norms.append([p.grad.norm().item() for p in params])  # type: ignore[union-attr]
            opt.step()
            opt.zero_grad(set_to_none=True)
            del norms[:-1]
        return step
    return make(False), {"no_sync": make(True)}


def case_encoder_fp32() -> Case:
    """FP32 encoder 12 x 768 (ViT-B-like tokens: batch 32 x 197), TF32 off; fixes: TF32, bf16."""
    torch.manual_seed(0)
    model = encoder(size(768, 64), size(12, 2))
    x = torch.randn(size(32, 2), size(197, 16), size(768, 64), device=DEV)

    def make(autocast: bool, tf32: bool) -> Step:
        step = trainer(model, lambda: model(x).float().square().mean(), autocast)[0]

        def run() -> None:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            step()
        return run
    return make(False, False), {"tf32": make(False, True), "bf16_autocast": make(True, False)}


def case_hand_attention() -> Case:
    """Hand-written causal attention, 8 layers x 1024 wide, batch 8 x 1024 tokens, bf16."""
    def make(fused: bool) -> Step:
        torch.manual_seed(0)
        model = Decoder(size(8192, 128), size(1024, 64), size(8, 1), fused).to(DEV)
        ids = torch.randint(0, size(8192, 128), (size(8, 2), size(1024, 16)), device=DEV)
        return trainer(model, lambda: F.cross_entropy(
            model(ids).float().flatten(0, 1), ids.flatten()), True)[0]
    return make(False), {"sdpa": make(True)}


def case_bn_convnet_nchw() -> Case:
    """BatchNorm conv net under bf16 autocast in NCHW, batch 64; fix: channels_last."""
    def make(channels_last: bool) -> Step:
        torch.manual_seed(0)
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        model = convnet(size(128, 16), size(8, 2)).to(memory_format=fmt)
        x = torch.randn(size(64, 2), 3, size(64, 16), size(64, 16), device=DEV)
        x = x.to(memory_format=fmt)
        return trainer(model, lambda: model(x).float().square().mean(), True)[0]
    return make(False), {"channels_last": make(True)}


def case_decoder_compile() -> Case:
    """GPT-style decoder (6 x 768, SDPA, written-out GELU), batch 8 x 1024, bf16; fix:
    torch.compile of the model."""
    torch.manual_seed(0)
    model = Decoder(size(16384, 128), size(768, 64), size(6, 1), True).to(DEV)
    ids = torch.randint(0, size(16384, 128), (size(8, 2), size(1024, 16)), device=DEV)
    compiled = model if SMOKE else torch.compile(model)

    def loss_of(net: nn.Module) -> Callable[[], torch.Tensor]:
        return lambda: F.cross_entropy(net(ids).float().flatten(0, 1), ids.flatten())
    return (trainer(model, loss_of(model), True)[0],
            {"torch_compile": trainer(model, loss_of(compiled), True)[0]})


CASES: dict[str, tuple[str, Callable[[], Case]]] = {
    "encoder_bf16_graph": ("cpu_bound", case_encoder_bf16),
    "convnet_bf16_graph": ("cpu_bound", case_convnet_bf16),
    "small_mlp_graph": ("cpu_bound", case_small_mlp),
    "mask_index_loss": ("host_sync", case_mask_index_loss),
    "nan_check_if": ("host_sync", case_nan_check_if),
    "grad_norm_items": ("host_sync", case_grad_norm_items),
    "encoder_fp32": ("tensor_cores_unused", case_encoder_fp32),
    "hand_attention": ("unfused_elementwise", case_hand_attention),
    "bn_convnet_nchw": ("layout_conversion", case_bn_convnet_nchw),
    "decoder_compile": ("unfused_elementwise", case_decoder_compile),
}
FIX_CATEGORY = {"cuda_graph": "cpu_bound", "no_sync": "host_sync", "tf32": "tensor_cores_unused",
                "bf16_autocast": "tensor_cores_unused", "sdpa": "unfused_elementwise",
                "channels_last": "layout_conversion", "torch_compile": "unfused_elementwise"}


def run_case(name: str, category: str, build: Callable[[], Case], folder: Path) -> dict:
    planted, fixes = build()
    rounds: dict[str, list[float]] = {"planted": [], **{f: [] for f in fixes}}

    def one_round() -> None:
        rounds["planted"].append(timed(planted))
        for fix, step in fixes.items():
            rounds[fix].append(timed(step))
    for _ in range(ROUNDS_BEFORE):
        one_round()
    unprofiled_us = record_aiprof(planted, folder / f"{name}.aiprof.trace.json.gz")
    record_plain(planted, folder / f"{name}.plain.trace.json.gz")
    for _ in range(ROUNDS_AFTER):
        one_round()
    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's defaults again
    torch.backends.cudnn.allow_tf32 = True
    planted_ms = statistics.median(rounds["planted"])
    measured = []
    for fix in fixes:
        fixed_ms = statistics.median(rounds[fix])
        measured.append({
            "fix": fix, "category": FIX_CATEGORY[fix], "fixed_step_ms": round(fixed_ms, 4),
            "fixed_rounds_ms": [round(t, 4) for t in rounds[fix]],
            "round_gain_pct": [round(100.0 * (1.0 - f / p), 2)
                               for p, f in zip(rounds["planted"], rounds[fix], strict=True)],
            "gain_pct": round(100.0 * (1.0 - fixed_ms / planted_ms), 2)})
    return {"case": name, "category": category, "planted_step_ms": round(planted_ms, 4),
            "planted_rounds_ms": [round(t, 4) for t in rounds["planted"]],
            "traces": {"aiprof": f"{name}.aiprof.trace.json.gz",
                       "plain": f"{name}.plain.trace.json.gz"},
            "capture_unprofiled_step_ms": [round(t / 1000.0, 4) for t in unprofiled_us],
            "fixes": measured}


def main(argv: list[str]) -> int:
    out = Path(os.environ.get("OUT", "out")) / "models"
    out.mkdir(parents=True, exist_ok=True)
    budget = float(os.environ.get("MODELS_BUDGET_S", "420"))
    wanted = [a for a in argv if not a.startswith("--")] or list(CASES)
    began = time.monotonic()
    labels: dict[str, object] = {
        "device": torch.cuda.get_device_name(0) if DEV == "cuda" else "cpu (smoke)",
        "torch": torch.__version__, "smoke": SMOKE,
        "method": f"no profiler, interleaved rounds (planted, then each fix), each the median "
                  f"of {MEASURE} steps after {WARMUP} warm-up; {ROUNDS_BEFORE} rounds before "
                  f"and {ROUNDS_AFTER} after the recordings (aiprof.profile, then plain "
                  "torch.profiler); gain from the medians of the rounds",
        "cases": []}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for name in wanted:
            category, build = CASES[name]
            if time.monotonic() - began > budget:
                labels["cases"].append({"case": name, "error": "skipped: time budget spent"})
                continue
            started = time.monotonic()
            try:
                row = run_case(name, category, build, folder)
            except Exception as error:  # report, never stop the others
                row = {"case": name, "category": category, "error": repr(error)[:500]}
                traceback.print_exc()
            row["wall_s"] = round(time.monotonic() - started, 1)
            labels["cases"].append(row)
            (out / "labels.json").write_text(json.dumps(labels, indent=2))
            print("models:", json.dumps(row)[:400], flush=True)
            if DEV == "cuda":
                torch.cuda.empty_cache()
        with tarfile.open(out / "traces.tar", "w") as tar:
            for path in sorted(folder.glob("*.trace.json.gz")):
                tar.add(path, arcname=path.name)
    print(f"models: {len(labels['cases'])} cases in {time.monotonic() - began:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
