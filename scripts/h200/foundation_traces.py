"""Record small real traces on a GPU for the trace reader's tests and the bundled demo trace.

Run from the repository root on a CUDA machine: ``PYTHONPATH=src python3
scripts/h200/foundation_traces.py``. Writes ``$OUT/foundation/*.trace.json.gz`` and
``$OUT/foundation/summary.json`` (aiprof's summary of each, for a quick look).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

OUT = Path(os.environ.get("OUT", "out")) / "foundation"


def record(name: str, model: nn.Module, make_batch, loss_fn, *, steps: int = 3) -> Path:
    path = OUT / f"{name}.trace.json.gz"
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=2, active=steps),
        record_shapes=True,
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(steps + 3):
            x, y = make_batch()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            prof.step()
    torch.cuda.synchronize()
    print(f"{name}: {path.stat().st_size / 1e6:.2f} MB")
    return path


def resnet50() -> Path:
    import torchvision

    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    x = torch.randn(64, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (64,), device="cuda")
    return record("h200_resnet50_bf16", model, lambda: (x, y), nn.functional.cross_entropy)


def gpt2() -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=50257)
    model = GPT2LMHeadModel(config).cuda()
    ids = torch.randint(0, config.vocab_size, (8, 512), device="cuda")

    def loss_fn(out, labels):
        return nn.functional.cross_entropy(out.logits.flatten(0, 1).float(), labels.flatten())

    return record("h200_gpt2_bf16", model, lambda: (ids, ids), loss_fn)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    print(torch.__version__, torch.cuda.get_device_name(0))
    paths = []
    for job in (resnet50, gpt2):
        start = time.perf_counter()
        try:
            paths.append(job())
        except Exception as error:  # keep the batch going; report what failed
            print(f"{job.__name__} failed: {error!r}")
        print(f"{job.__name__}: {time.perf_counter() - start:.1f} s")
    try:
        import aiprof
        from aiprof.jsontext import dumps
        from aiprof.report.summary_json import summary_document

        doc = summary_document([s for p in paths for s in aiprof.summary(aiprof.load_trace(p))])
        (OUT / "summary.json").write_text(dumps(doc))
        for rank in doc["ranks"]:
            print(rank["path"], rank["num_steps"], rank["gpu_busy_pct"], rank["step_time_us"])
    except Exception as error:
        print(f"aiprof summary failed: {error!r}")


if __name__ == "__main__":
    main()
