"""Two gloo ranks (under torchrun): rank 1 exits with the status given, or waits for a
signal ("wait"); rank 0 waits at a barrier it never passes."""

import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
print(f"rank {dist.get_rank()} ready", flush=True)
if sys.argv[1] == "wait":
    time.sleep(120)
elif dist.get_rank() == 1:
    sys.exit(int(sys.argv[1]))
dist.barrier()
time.sleep(120)
