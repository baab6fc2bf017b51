"""Changes to / before training: the record must not depend on the working directory."""

import os

import torch

os.chdir("/")
model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
print("trained in", os.getcwd())
