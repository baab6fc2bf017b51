"""An inference loop without an optimizer, running for a fixed wall time (duration mode)."""

import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
print(f"script start {time.time_ns()}", flush=True)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).eval()
end = time.monotonic() + seconds
batches = 0
with torch.inference_mode():
    while time.monotonic() < end:
        model(torch.randn(8, 64))
        batches += 1
print(f"served {batches} batches")
