"""ResNet-50 (torchvision, random weights) trained on synthetic ImageNet-sized batches.

    python3 resnet50_train.py [--steps 12] [--batch 64] [--amp]
"""

import argparse

import torch
import torchvision

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--amp", action="store_true", help="bf16 autocast")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torchvision.models.resnet50(weights=None).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
images = torch.randn(args.batch, 3, 224, 224, device=device)
labels = torch.randint(0, 1000, (args.batch,), device=device)
for _ in range(args.steps):
    with torch.autocast(device, dtype=torch.bfloat16, enabled=args.amp):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(f"resnet50: {args.steps} steps, batch {args.batch}, last loss {loss.item():.3f}")
