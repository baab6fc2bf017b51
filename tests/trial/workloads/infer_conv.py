"""Conv inference, no optimizer: steps are the calls of ``infer_batch``."""

import torch

model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
images = torch.randn(2, 3, 8, 8)


def infer_batch(batch):
    with torch.no_grad():
        return model(batch)


for _ in range(1000):
    out = infer_batch(images)
print("infer_conv: all 1000 batches (should have been stopped)")
