"""DDP ResNet-50 on 2 GPUs, profiled on both ranks: a clean run and one where rank 1 sleeps.

Run from the repo root on a 2-GPU machine (about 40-70 s):
    OUT=/tmp/out PYTHONPATH=src torchrun --nproc_per_node 2 scripts/h200/distributed_ddp.py
Writes $OUT/distributed/ddp/rank{0,1}.trace.json.gz (clean) and
$OUT/distributed/ddp_straggler/rank{0,1}.trace.json.gz (rank 1 sleeps 50 ms before each step),
plus $OUT/distributed/ddp_meta.json (settings, step times). Commit both folders and the meta file
under tests/data/distributed/. Each trace holds 3 profiled steps after 6 unprofiled warm-up steps.

With ``--no-profile`` it only trains (for ``aiprof run --nproc 2``: distributed_ddp_aiprof_run.sh).
NCCL_NVLS_ENABLE=0 is kept set. Needs torch and torchvision (ResNet-50, random weights and data).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

WARMUP_STEPS, PROFILED_STEPS, BATCH, SLEEP_MS = 6, 3, 64, 50.0


def _setup():  # type: ignore[no-untyped-def]
    import torch
    import torch.distributed as dist
    import torchvision

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    data = torch.randn(BATCH, 3, 224, 224, device="cuda")
    target = torch.randint(0, 1000, (BATCH,), device="cuda")
    return ddp, optimizer, data, target


def _step(ddp, optimizer, data, target, sleep_s: float) -> None:  # type: ignore[no-untyped-def]
    import torch

    if sleep_s:
        time.sleep(sleep_s)
    optimizer.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(ddp(data), target).backward()
    optimizer.step()


def _profiled(folder: Path, ddp, optimizer, data, target, sleep_s: float) -> float:  # type: ignore[no-untyped-def]
    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    for _ in range(WARMUP_STEPS):
        _step(ddp, optimizer, data, target, sleep_s)
    torch.cuda.synchronize()
    dist.barrier()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    start = time.perf_counter()
    # A schedule makes the profiler mark ProfilerStep#N, which the analysis uses as steps.
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=PROFILED_STEPS, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=schedule) as prof:
        for _ in range(PROFILED_STEPS + 1):
            _step(ddp, optimizer, data, target, sleep_s)
            prof.step()
        torch.cuda.synchronize()
    elapsed = (time.perf_counter() - start) / (PROFILED_STEPS + 1)
    folder.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(folder / f"rank{rank}.trace.json.gz"))
    dist.barrier()
    return elapsed * 1e3


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--sleep-rank", type=int, default=-1)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    out = Path(os.environ.get("OUT", "out")) / "distributed"
    try:
        import torch.distributed as dist

        ddp, optimizer, data, target = _setup()
        if args.no_profile:
            sleep = SLEEP_MS / 1e3 if rank == args.sleep_rank else 0.0
            for _ in range(args.steps):
                _step(ddp, optimizer, data, target, sleep)
            dist.destroy_process_group()
            return 0
        clean_ms = _profiled(out / "ddp", ddp, optimizer, data, target, 0.0)
        slow_ms = _profiled(
            out / "ddp_straggler",
            ddp,
            optimizer,
            data,
            target,
            SLEEP_MS / 1e3 if rank == 1 else 0.0,
        )
        if rank == 0:
            meta = {
                "model": "torchvision resnet50",
                "batch_per_gpu": BATCH,
                "sleep_rank": 1,
                "sleep_ms": SLEEP_MS,
                "warmup_steps": WARMUP_STEPS,
                "profiled_steps": PROFILED_STEPS,
                "step_ms_clean": clean_ms,
                "step_ms_straggler": slow_ms,
                "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
            }
            (out / "ddp_meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
            print(
                f"DDP ResNet-50 x2: {clean_ms:.1f} ms/step clean, "
                f"{slow_ms:.1f} ms/step with rank 1 "
                f"sleeping {SLEEP_MS:.0f} ms; traces in {out}"
            )
        dist.destroy_process_group()
    except Exception:  # report and let the rest of the batch run
        print(f"distributed_ddp (rank {rank}) failed:\n{traceback.format_exc()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
