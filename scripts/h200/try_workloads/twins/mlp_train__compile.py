# Twin of mlp_train.py with the 'compile' fix written in.
"""A deep narrow MLP (many small layers: launch-bound), Adam, and a cautious
torch.cuda.empty_cache() after every step. FP32.

    python mlp_train.py [--iters 1000] [--batch 256] [--width 256] [--depth 12]
"""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--width", type=int, default=256)
parser.add_argument("--depth", type=int, default=12)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
layers = []
for _ in range(args.depth):
    layers += [nn.Linear(args.width, args.width), nn.LayerNorm(args.width), nn.GELU()]
model = nn.Sequential(*layers, nn.Linear(args.width, 1)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
model.compile()
x = torch.randn(args.batch, args.width, device=device)
y = torch.randn(args.batch, 1, device=device)
for _ in range(args.iters):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    torch.cuda.empty_cache()
print(f"mlp: done, last loss {loss.item():.4f}")
