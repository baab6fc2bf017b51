"""No optimizer: each step is one call of train_step(), wrapped in record_function("iteration")."""

import torch


def train_step(weight: torch.Tensor) -> torch.Tensor:
    with torch.profiler.record_function("iteration"):
        return (weight @ weight).tanh()


weight = torch.randn(32, 32)
for _ in range(9):
    weight = train_step(weight)
