"""GPT-2 (transformers GPT2LMHeadModel from GPT2Config, random weights) trained on random
tokens, FP32, AdamW. A user's script: no aiprof in it.

    python gpt2_train.py [--iters 1000] [--batch 8] [--seq 256] [--layers 4] [--embd 768]
"""

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seq", type=int, default=256)
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--embd", type=int, default=768)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
config = GPT2Config(n_layer=args.layers, n_embd=args.embd, n_head=max(1, args.embd // 64),
                    n_positions=max(1024, args.seq))
model = GPT2LMHeadModel(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=device)
for _ in range(args.iters):
    loss = model(input_ids=tokens, labels=tokens).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(f"gpt2: done, last loss {loss.item():.4f}")
