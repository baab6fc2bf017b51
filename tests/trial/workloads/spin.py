"""Records its pid in PIDS_DIR, then trains slowly forever (for Ctrl-C and timeout tests)."""

import os
import sys
import time

import torch

pids = sys.argv[1]
with open(os.path.join(pids, f"{os.getpid()}.pid"), "w") as handle:
    handle.write(str(os.getpid()))
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
step = 0
while True:
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    step += 1
    time.sleep(0.5 if step > 2 else 0.0)
