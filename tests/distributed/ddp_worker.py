"""A 2-rank DDP training run under torch.profiler, for the end-to-end tests.

Run: ``torchrun --nproc_per_node 2 ddp_worker.py OUT [--steps N] [--sleep-rank R --sleep-ms MS]``.
Each rank writes ``OUT_DIR/rank<N>.trace.json.gz``. The model is a small ResNet-style CNN defined
here (torchvision does not import beside every torch build). Works on CPU (gloo) and GPU (nccl).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


def small_resnet(channels: int = 32, blocks: int = 2, classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(channels),
        nn.ReLU(),
        *[Block(channels) for _ in range(blocks)],
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(channels, classes),
    )


def _step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: torch.Tensor,
    target: torch.Tensor,
    rank: int,
    args: argparse.Namespace,
) -> None:
    if rank == args.sleep_rank:
        time.sleep(args.sleep_ms / 1000)
    optimizer.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(data), target).backward()
    optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image", type=int, default=32)
    parser.add_argument("--sleep-rank", type=int, default=-1)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="no torch.profiler here (when run under 'aiprof run --nproc')",
    )
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        small_resnet().to(device), device_ids=[local] if cuda else None, bucket_cap_mb=1
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(args.batch, 3, args.image, args.image, device=device)
    target = torch.randint(0, 10, (args.batch,), device=device)
    if args.no_profile:
        for _ in range(args.steps):
            _step(model, optimizer, data, target, rank, args)
        dist.destroy_process_group()
        return
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    args.out.mkdir(parents=True, exist_ok=True)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=args.steps - 1, repeat=1)
    with torch.profiler.profile(
        activities=activities, schedule=schedule, record_shapes=True
    ) as prof:
        for _ in range(args.steps):
            _step(model, optimizer, data, target, rank, args)
            prof.step()
    prof.export_chrome_trace(str(args.out / f"rank{rank}.trace.json.gz"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
