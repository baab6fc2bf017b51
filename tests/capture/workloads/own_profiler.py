"""A script that already runs torch.profiler itself."""

import torch

model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.profiler.profile():
    for _ in range(4):
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
