"""Trains two steps, then fails with a message the report must show (seeded: every process
sees the same losses, so the numerics guard compares like with like)."""

import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    if step == 1 and torch.backends.cuda.matmul.allow_tf32:
        raise RuntimeError("planted failure under tf32")
