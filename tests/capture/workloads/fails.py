"""Trains a few steps, then fails in the way given on the command line."""

import os
import signal
import sys

import torch

how = sys.argv[1]
model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 8):
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
print("about to", how, flush=True)
if how == "raise":
    raise RuntimeError("boom in user code")
if how == "exit":
    sys.exit(3)
if how == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
if how == "sigint":
    os.kill(os.getpid(), signal.SIGINT)
print("not reached")
