"""One rank of a CPU-only 2-rank gloo run under torch.profiler whose ranks are slow in turn:
``python gloo_two_phase_worker.py OUT_DIR`` with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set.

Each step: a matmul (``aten::mm``, large on rank 1), an all-reduce, a batched matmul
(``aten::bmm``, large on rank 0), another all-reduce. The step's longest dependency path runs
through rank 1's matmul, the first all-reduce, then rank 0's batched matmul."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

LARGE, SMALL = 800, 32
"""Matrix sides: an 800x800 matmul takes 15 ms on one core of the 2-core CPU VM, a 32x32 one
microseconds: more than the milliseconds a busy machine's scheduler holds a process back."""


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    side_a, side_b = (LARGE, SMALL) if rank == 1 else (SMALL, LARGE)
    x = torch.randn(side_a, side_a)
    y = torch.randn(2, side_b, side_b)
    grads = torch.randn(64 * 1024)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=schedule) as prof:
        for _ in range(3):
            grads.add_((x @ x).sum())
            dist.all_reduce(grads)
            grads.add_(torch.bmm(y, y).sum())
            dist.all_reduce(grads)
            prof.step()
    out.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out / f"rank{rank}.trace.json.gz"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
