"""Host work while the GPU idles (``host_busy``): planted cases and their fixed twins, measured.

    OUT=/some/dir PYTHONPATH=src python3 scripts/h200/host_busy_twins.py            # one GPU
    OUT=/some/dir PYTHONPATH=src python3 scripts/h200/host_busy_twins.py --smoke    # CPU, tiny

Cases (none of them the issue's verbatim):

- ``clip_preprocess_in_loop``: each step builds a batch of short clips on the CPU (uint8 frames
  to float, resized, normalized) in the training loop, outside any DataLoader, then trains a
  small 3-D conv net on it; the twin runs the same per-clip work in DataLoader workers (8,
  pinned, prefetch 4).
- ``cpu_metric_in_loop``: each step copies the logits to the host and computes a rank metric on
  the CPU (a sort per row); the twin computes it on the GPU and reads nothing back.

Each case is timed WITHOUT the profiler, interleaved (rounds of planted then fixed; each round
the mean of MEASURE steps after WARMUP, wall time with a device synchronize at the ends: block
means, as a DataLoader alternates fast and starved steps), 2 rounds before the recording and 2
after; the planted version is recorded with ``aiprof.profile`` (its defaults). Writes at most
3 files under $OUT/host_busy/: <case>.trace.json.gz and labels.json (case, category
"host_busy", planted/fixed ms per round, gain_pct = 100 * (1 - fixed / planted) of the medians,
the capture's unprofiled step times). Well under 10 minutes on one H200.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

Step = Callable[[], None]
SMOKE = False
DEV = "cuda"


def sizes() -> dict[str, int]:
    """Workload sizes: the H200's, or tiny ones for the CPU smoke run."""
    if SMOKE:
        return {"clips": 2, "frames": 2, "src": 32, "dst": 16, "rows": 64, "classes": 128,
                "warmup": 1, "measure": 2, "workers": 2}
    return {"clips": 16, "frames": 8, "src": 256, "dst": 112, "rows": 4096, "classes": 32000,
            "warmup": 3, "measure": 8, "workers": 8}


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def timed(step: Step) -> float:
    """Mean wall time of a block of steps (ms), device synchronized at both ends."""
    n = sizes()
    for _ in range(n["warmup"]):
        step()
    sync()
    began = time.perf_counter()
    for _ in range(n["measure"]):
        step()
    sync()
    return (time.perf_counter() - began) * 1000.0 / n["measure"]


class Clips(torch.utils.data.Dataset):
    """Short clips decoded to uint8 frames and preprocessed per clip on the CPU."""

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> torch.Tensor:
        n = sizes()
        g = torch.Generator().manual_seed(i)
        frames = torch.randint(0, 256, (n["frames"], 3, n["src"], n["src"]), generator=g,
                               dtype=torch.uint8)
        x = F.interpolate(frames.float() / 255.0, size=(n["dst"], n["dst"]), mode="bilinear",
                          antialias=True)
        x = (x - x.mean(dim=(0, 2, 3), keepdim=True)) / (x.std(dim=(0, 2, 3), keepdim=True) + 1e-6)
        return x.permute(1, 0, 2, 3).contiguous()  # C, T, H, W


def case_clips() -> tuple[Step, Step]:
    n = sizes()
    model = nn.Sequential(nn.Conv3d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Conv3d(32, 64, 3, padding=1),
                          nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                          nn.Linear(64, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Clips()
    counter = iter(range(10**9))

    def train(x: torch.Tensor) -> None:
        loss = model(x.to(DEV, non_blocking=True)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def planted() -> None:  # preprocessing in the loop, outside any DataLoader
        train(torch.stack([data[next(counter)] for _ in range(n["clips"])]))

    loader = torch.utils.data.DataLoader(data, batch_size=n["clips"], num_workers=n["workers"],
                                         pin_memory=DEV == "cuda", persistent_workers=True,
                                         prefetch_factor=4, shuffle=False)
    batches = iter(loader)

    def fixed() -> None:
        train(next(batches))

    return planted, fixed


def case_metric() -> tuple[Step, Step]:
    n = sizes()
    model = nn.Linear(1024, n["classes"]).to(DEV)
    x = torch.randn(n["rows"], 1024, device=DEV)
    target = torch.randint(0, n["classes"], (n["rows"],), device=DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept: list[torch.Tensor] = []

    def step(on_host: bool) -> None:
        logits = model(x)
        F.cross_entropy(logits, target).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        scores = logits.detach().cpu() if on_host else logits.detach()
        labels = target.cpu() if on_host else target
        order = scores.argsort(dim=1, descending=True)  # rank of the true class per row
        rank = (order == labels[:, None]).float().argmax(dim=1)
        kept.append(rank.float().mean())
        del kept[:-1]

    return (lambda: step(True)), (lambda: step(False))


CASES: dict[str, Callable[[], tuple[Step, Step]]] = {
    "clip_preprocess_in_loop": case_clips,
    "cpu_metric_in_loop": case_metric,
}


def record(step: Step, path: Path) -> list[float]:
    """The planted step under ``aiprof.profile`` (defaults); the capture's unprofiled times."""
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


def run_case(name: str, out: Path) -> dict[str, object]:
    planted, fixed = CASES[name]()
    planted_ms, fixed_ms = [], []
    for _ in range(2):
        planted_ms.append(timed(planted))
        fixed_ms.append(timed(fixed))
    unprofiled = record(planted, out / f"{name}.trace.json.gz")
    for _ in range(2):
        planted_ms.append(timed(planted))
        fixed_ms.append(timed(fixed))
    p, f = statistics.median(planted_ms), statistics.median(fixed_ms)
    return {"case": name, "category": "host_busy", "planted_ms": p, "fixed_ms": f,
            "planted_rounds_ms": planted_ms, "fixed_rounds_ms": fixed_ms,
            "gain_pct": 100.0 * (1.0 - f / p), "unprofiled_step_us": unprofiled}


def main() -> int:
    global SMOKE, DEV
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="tiny sizes; runs on the CPU")
    parser.add_argument("cases", nargs="*", default=list(CASES))
    args = parser.parse_args()
    SMOKE = args.smoke
    DEV = "cuda" if torch.cuda.is_available() and not SMOKE else "cpu"
    out = Path(os.environ.get("OUT", "out")) / "host_busy"
    out.mkdir(parents=True, exist_ok=True)
    labels: dict[str, object] = {"device": torch.cuda.get_device_name() if DEV == "cuda"
                                 else "cpu", "torch": torch.__version__, "smoke": SMOKE,
                                 "cases": []}
    for name in args.cases:
        try:
            row = run_case(name, out)
        except Exception as error:  # one case's failure does not stop the others
            row = {"case": name, "error": f"{type(error).__name__}: {error}"}
        labels["cases"].append(row)  # type: ignore[attr-defined]
        (out / "labels.json").write_text(json.dumps(labels, indent=2))
        print("host_busy:", json.dumps(row)[:300])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
