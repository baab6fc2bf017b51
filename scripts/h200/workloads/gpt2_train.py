"""A GPT-2 (transformers, built from GPT2Config, random weights) trained on random tokens.

    python3 gpt2_train.py [--steps 12] [--batch 8] [--seq 512] [--layers 12]
"""

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seq", type=int, default=512)
parser.add_argument("--layers", type=int, default=12)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
config = GPT2Config(n_layer=args.layers, n_positions=max(1024, args.seq))
model = GPT2LMHeadModel(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=device)
for _ in range(args.steps):
    loss = model(input_ids=tokens, labels=tokens).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(f"gpt2: {args.steps} steps, batch {args.batch}x{args.seq}, last loss {loss.item():.3f}")
