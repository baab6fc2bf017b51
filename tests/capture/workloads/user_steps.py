"""Marks steps with aiprof.step() (two optimizers would otherwise be ambiguous)."""

import torch

from aiprof.capture import step

generator = torch.nn.Linear(8, 8)
critic = torch.nn.Linear(8, 1)
opt_g = torch.optim.SGD(generator.parameters(), lr=0.1)
opt_c = torch.optim.SGD(critic.parameters(), lr=0.1)
for _ in range(10):
    critic(generator(torch.randn(4, 8))).mean().backward()
    opt_c.step()
    opt_g.step()
    step()
