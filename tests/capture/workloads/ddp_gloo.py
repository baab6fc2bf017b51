"""Two-rank data-parallel training on CPU with gloo (run under torchrun)."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(8):
    model(torch.randn(16, 64)).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
dist.barrier()
print(f"rank {dist.get_rank()} done")
dist.destroy_process_group()
