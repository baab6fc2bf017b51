"""Two-rank DDP on CPU with gloo; rank 1 sleeps 30 ms more per step (the straggler)."""

import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 32))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(200):
    loss = model(torch.randn(8, 32)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if rank == 1:
        time.sleep(0.03)
