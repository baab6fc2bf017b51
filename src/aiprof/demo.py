"""The bundled demo: a small PyTorch training loop profiled here, and a real H200 trace."""

from __future__ import annotations

import tempfile
from pathlib import Path

from aiprof.optional import import_torch

BUNDLED_EXAMPLE = "h200_resnet50"
"""A real trace recorded on an NVIDIA H200 (see docs/foundation.md), one of the shipped examples."""


def bundled_trace_path() -> Path:
    """Path of the H200 trace that ships with the package."""
    from aiprof.record.examples import example

    return example(BUNDLED_EXAMPLE).path


def profile_small_training(out_dir: Path | None = None, *, steps: int = 4) -> Path:
    """Train a small CNN on random data for a few steps under torch.profiler; return the trace.

    Runs on the GPU when torch sees one, else on the CPU. Raises MissingDependencyError
    without torch.
    """
    torch = import_torch("the demo workload")
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = torch.utils.data.TensorDataset(torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    out = Path(out_dir or tempfile.mkdtemp(prefix="aiprof-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "demo.trace.json.gz"
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=steps),
        record_shapes=True,
        profile_memory=True,
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for step, (x, y) in enumerate(loader):
            if step >= steps + 2:
                break
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            prof.step()
    return path
