"""One rank of a CPU-only 2-rank gloo run whose all-reduce is most of the step, under
torch.profiler: ``python gloo_allreduce_worker.py OUT_DIR`` with RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set. Each step is a small matmul and an all-reduce of a 16 MB tensor."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    x = torch.randn(256, 256)
    grads = torch.randn(4 * 1024 * 1024)  # 16 MB of float32: the "gradients"
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=4, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=schedule) as prof:
        for _ in range(6):
            y = x @ x
            grads.add_(y.sum())
            dist.all_reduce(grads)
            prof.step()
    out.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out / f"rank{rank}.trace.json.gz"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
