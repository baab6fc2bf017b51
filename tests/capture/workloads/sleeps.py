"""Trains a few steps, says so, then sleeps: a run to kill from outside."""

import time

import torch

model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
print("sleeping", flush=True)
time.sleep(120)
