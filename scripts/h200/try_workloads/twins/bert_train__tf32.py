# Twin of bert_train.py with the 'tf32' fix written in.
"""BERT (transformers BertForSequenceClassification from BertConfig, random weights) fine-tuned
on random tokens, FP32, AdamW. A user's script: no aiprof in it.

    python bert_train.py [--iters 1000] [--batch 32] [--seq 128] [--layers 6] [--hidden 512]
"""

import argparse

import torch
from transformers import BertConfig, BertForSequenceClassification

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--seq", type=int, default=128)
parser.add_argument("--layers", type=int, default=6)
parser.add_argument("--hidden", type=int, default=512)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.manual_seed(0)
config = BertConfig(num_hidden_layers=args.layers, hidden_size=args.hidden,
                    num_attention_heads=max(1, args.hidden // 64),
                    intermediate_size=4 * args.hidden, num_labels=4)
model = BertForSequenceClassification(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=device)
labels = torch.randint(0, 4, (args.batch,), device=device)
for _ in range(args.iters):
    loss = model(input_ids=tokens, labels=labels).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(f"bert: done, last loss {loss.item():.4f}")
